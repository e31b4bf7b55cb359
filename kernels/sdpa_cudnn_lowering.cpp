// Lowering of the attention graphs to cuDNN backend descriptors (kernels/sdpa_cudnn_lowering.h).
#include "kernels/sdpa_cudnn_lowering.h"
#include "kernels/exec.h"

namespace moebench::cudnn_backend {

std::string last_error() {
  char text[2048] = {0};
  cudnnGetLastErrorString(text, sizeof text);
  return text[0] ? std::string(" (") + text + ")" : "";
}

void check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(std::string("cuDNN: ") + call + " failed: " + cudnnGetErrorString(s) + last_error());
}


namespace {

cudnnDataType_t cudnn_type(SdpaType t) {
  switch (t) {
    case SdpaType::f32: return CUDNN_DATA_FLOAT;
    case SdpaType::f16: return CUDNN_DATA_HALF;
    case SdpaType::bf16: return CUDNN_DATA_BFLOAT16;
    case SdpaType::i32: return CUDNN_DATA_INT32;
    case SdpaType::boolean: return CUDNN_DATA_BOOLEAN;
  }
  return CUDNN_DATA_FLOAT;
}

cudnnPointwiseMode_t cudnn_mode(SdpaPointwise m) {
  switch (m) {
    case SdpaPointwise::mul: return CUDNN_POINTWISE_MUL;
    case SdpaPointwise::add: return CUDNN_POINTWISE_ADD;
    case SdpaPointwise::sub: return CUDNN_POINTWISE_SUB;
    case SdpaPointwise::div: return CUDNN_POINTWISE_DIV;
    case SdpaPointwise::exp: return CUDNN_POINTWISE_EXP;
    case SdpaPointwise::log: return CUDNN_POINTWISE_LOG;
    case SdpaPointwise::gen_index: return CUDNN_POINTWISE_GEN_INDEX;
    case SdpaPointwise::cmp_ge: return CUDNN_POINTWISE_CMP_GE;
    case SdpaPointwise::binary_select: return CUDNN_POINTWISE_BINARY_SELECT;
    case SdpaPointwise::identity: return CUDNN_POINTWISE_IDENTITY;
  }
  return CUDNN_POINTWISE_IDENTITY;
}

Owned tensor(const SdpaTensor& t) {
  auto d = std::make_unique<Descriptor>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  const cudnnDataType_t type = cudnn_type(t.type);
  const std::int64_t alignment = 16;
  const bool is_virtual = t.is_virtual, by_value = t.by_value;
  d->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type);
  d->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, t.dims.data(), 4);
  d->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, t.strides.data(), 4);
  d->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &t.uid);
  d->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment);
  d->set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
  if (by_value) d->set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
  if (t.reordered) {
    const cudnnBackendTensorReordering_t r = CUDNN_TENSOR_REORDERING_F16x16;
    d->set(CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, &r);
  }
  d->finalize("tensor " + t.name);
  return d;
}

// One op's descriptor, returned; it and its parameters' descriptor are kept in `keep`.
cudnnBackendDescriptor_t operation(const SdpaOp& op, const std::vector<Owned>& t, std::vector<Owned>& keep) {
  const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
  Owned params, o;
  switch (op.kind) {
    case SdpaOpKind::matmul:
      params = std::make_unique<Descriptor>(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
      params->set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32);
      params->finalize("matmul descriptor");
      o = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
      o->set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *t[op.x]);
      o->set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *t[op.b]);
      o->set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *t[op.y]);
      o->set(CUDNN_ATTR_OPERATION_MATMUL_DESC, *params);
      break;
    case SdpaOpKind::pointwise: {
      params = std::make_unique<Descriptor>(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
      const cudnnPointwiseMode_t mode = cudnn_mode(op.mode);
      const cudnnDataType_t precision = cudnn_type(op.compute);
      params->set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode);
      params->set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
      if (op.mode == SdpaPointwise::gen_index) {
        const std::int64_t axis = op.axis;
        params->set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
      }
      params->finalize("pointwise descriptor");
      o = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
      o->set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, *params);
      o->set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *t[op.x]);
      if (op.b >= 0) o->set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *t[op.b]);
      if (op.t >= 0) o->set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t[op.t]);
      o->set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *t[op.y]);
      break;
    }
    case SdpaOpKind::reduction: {
      params = std::make_unique<Descriptor>(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
      const cudnnReduceTensorOp_t r = op.reduce == SdpaReduce::max ? CUDNN_REDUCE_TENSOR_MAX : CUDNN_REDUCE_TENSOR_ADD;
      params->set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &r);
      params->set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32);
      params->finalize("reduction descriptor");
      o = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
      o->set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *t[op.x]);
      o->set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *t[op.y]);
      o->set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, *params);
      break;
    }
    case SdpaOpKind::reshape:
      o = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
      o->set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *t[op.x]);
      o->set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *t[op.y]);
      break;
  }
  o->finalize("operation writing " + std::to_string(op.y));
  if (params) keep.push_back(std::move(params));
  keep.push_back(std::move(o));
  return keep.back()->get();
}

}  // namespace

Lowered lower(const SdpaGraph& g, cudnnHandle_t handle) {
  Lowered l;
  for (const SdpaTensor& t : g.tensors) l.tensors.push_back(tensor(t));
  std::vector<cudnnBackendDescriptor_t> op_list;
  for (const SdpaOp& op : g.ops) op_list.push_back(operation(op, l.tensors, l.ops));
  l.graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  l.graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, op_list.data(), std::int64_t(op_list.size()));
  if (handle) l.graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  l.graph->finalize("operation graph");
  return l;
}

std::vector<Owned> engine_configs(const Lowered& l, cudnnBackendHeurMode_t mode, const Descriptor* device, std::string& tried) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *l.graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  if (device) heuristics.set(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *device);
  if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) {
    tried += " heuristics mode " + std::to_string(int(mode)) + " refused the graph" + last_error() + ";";
    return {};
  }
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "engine count");
  std::vector<Owned> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(configs.back()->get());
  }
  check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &count,
                                 raw.data()),
        "engine configurations");
  configs.resize(std::size_t(count));
  if (configs.empty()) tried += " heuristics mode " + std::to_string(int(mode)) + " gave no configuration;";
  return configs;
}

long long engine_index(const Descriptor& config) {
  Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cudnnBackendDescriptor_t e = engine.get();
  std::int64_t n = 0, index = -1;
  check(cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &e),
        "configuration's engine");
  check(cudnnBackendGetAttribute(e, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index), "engine index");
  return index;
}

}  // namespace moebench::cudnn_backend
