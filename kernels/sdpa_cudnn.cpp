// The attention graphs (kernels/sdpa_graph.h) through cuDNN's backend API: each tensor and op
// becomes a backend descriptor, heuristics rank the engines for the operation graph, and the
// first configuration that finalizes becomes the execution plan, kept per thread, device and
// graph. A run binds the non-virtual tensors' uids to memory in a variant pack.
#include <cuda_runtime.h>
#include <cudnn.h>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "kernels/cuda_check.cuh"
#include "kernels/sdpa.h"

namespace moebench {

namespace {

std::string last_error() {
  char text[2048] = {0};
  cudnnGetLastErrorString(text, sizeof text);
  return text[0] ? std::string(" (") + text + ")" : "";
}

void check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw Error(std::string("cuDNN: ") + call + " failed: " + cudnnGetErrorString(s) + last_error());
}

class Descriptor {
 public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) { check(cudnnBackendCreateDescriptor(type, &d_), "create descriptor"); }
  ~Descriptor() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  template <class T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, std::int64_t n = 1) {
    check(cudnnBackendSetAttribute(d_, name, type, n, values), "set attribute");
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& d) {
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &d.d_);
  }
  void finalize(const std::string& what) { check(cudnnBackendFinalize(d_), what.c_str()); }
  cudnnBackendDescriptor_t get() const { return d_; }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};
using Owned = std::unique_ptr<Descriptor>;

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

// An execution plan and everything it was built from, which it refers to.
struct Plan {
  SdpaGraph graph;  // its by-value scalars are read from here at each run
  std::vector<Owned> descriptors;
  Owned plan;
  std::int64_t workspace = 0;
};

std::string key(const SdpaGraph& g) {
  std::string k;
  for (const SdpaTensor& t : g.tensors) {
    for (int i = 0; i < 4; ++i) k += std::to_string(t.dims[i]) + "," + std::to_string(t.strides[i]) + ",";
    k += std::to_string(int(t.type));
    if (t.is_virtual) k += 'v';
    if (t.by_value) k += std::to_string(t.value);
    k += ';';
  }
  for (const SdpaOp& o : g.ops) k += std::to_string(int(o.kind)) + "." + std::to_string(int(o.mode)) + ";";
  return k;
}

// One cuDNN handle and the plans built on it, per thread and device. Neither is ever destroyed:
// at exit the CUDA runtime may already be gone.
struct Context {
  cudnnHandle_t handle = nullptr;
  std::map<std::string, std::unique_ptr<Plan>> plans;
};

Context& context() {
  thread_local std::map<int, Context*> per_device;
  int device = 0;
  MOEBENCH_CUDA_CHECK(cudaGetDevice(&device));
  Context*& c = per_device[device];
  if (!c) {
    c = new Context;
    check(cudnnCreate(&c->handle), "cudnnCreate");
  }
  return *c;
}

std::unique_ptr<Plan> build(const SdpaGraph& g, cudnnHandle_t handle) {
  auto p = std::make_unique<Plan>();
  p->graph = g;
  std::vector<Owned> tensors;
  for (const SdpaTensor& t : g.tensors) tensors.push_back(tensor(t));
  std::vector<Owned> ops;
  std::vector<cudnnBackendDescriptor_t> op_list;
  for (const SdpaOp& op : g.ops) op_list.push_back(operation(op, tensors, ops));
  auto graph = std::make_unique<Descriptor>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, op_list.data(), std::int64_t(op_list.size()));
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  graph->finalize("operation graph");
  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, *graph);
    heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
    if (cudnnBackendFinalize(heuristics.get()) != CUDNN_STATUS_SUCCESS) {
      tried += " heuristics mode " + std::to_string(int(mode)) + " refused the graph" + last_error() + ";";
      continue;
    }
    std::int64_t count = 0;
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                   nullptr),
          "engine count");
    std::vector<Owned> configs;
    std::vector<cudnnBackendDescriptor_t> raw_configs;
    for (std::int64_t i = 0; i < count; ++i) {
      configs.push_back(std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
      raw_configs.push_back(configs.back()->get());
    }
    check(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                   &count, raw_configs.data()),
          "engine configurations");
    for (std::int64_t i = 0; i < count; ++i) {
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i]);
      if (const cudnnStatus_t s = cudnnBackendFinalize(plan->get()); s != CUDNN_STATUS_SUCCESS) {
        tried += " configuration " + std::to_string(i) + ": " + cudnnGetErrorString(s) + last_error() + ";";
        continue;
      }
      std::int64_t got = 0;
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                     &p->workspace),
            "plan workspace size");
      p->plan = std::move(plan);
      for (Owned& c : configs) p->descriptors.push_back(std::move(c));
      break;
    }
    if (p->plan) break;
    tried += " heuristics mode " + std::to_string(int(mode)) + " gave " + std::to_string(count) + " configurations;";
  }
  if (!p->plan)
    throw Error("cuDNN (version " + std::to_string(cudnnGetVersion()) + ") has no engine for the fused attention graph of " +
                std::to_string(g.ops.size()) + " ops:" + tried + "\n" + describe_sdpa_graph(g));
  for (Owned& t : tensors) p->descriptors.push_back(std::move(t));
  for (Owned& o : ops) p->descriptors.push_back(std::move(o));
  p->descriptors.push_back(std::move(graph));
  return p;
}

Plan& plan_for(const SdpaGraph& g) {
  Context& c = context();
  std::unique_ptr<Plan>& p = c.plans[key(g)];
  if (!p) p = build(g, c.handle);
  return *p;
}

}  // namespace

bool sdpa_cudnn_built() { return true; }

std::size_t sdpa_cudnn_workspace(const SdpaGraph& g, void*) { return std::size_t(plan_for(g).workspace); }

void sdpa_cudnn_run(const SdpaGraph& g, void* const* pointers, void* workspace, void* stream) {
  Plan& p = plan_for(g);
  Context& c = context();
  const auto s = static_cast<cudaStream_t>(stream);
  check(cudnnSetStream(c.handle, s), "cudnnSetStream");
  std::vector<std::int64_t> uids;
  std::vector<void*> data;
  for (std::size_t i = 0; i < p.graph.tensors.size(); ++i) {
    SdpaTensor& t = p.graph.tensors[i];
    if (t.is_virtual) continue;
    void* at = t.by_value ? static_cast<void*>(&t.value) : pointers[i];
    if (!at) throw Error("sdpa: no memory for " + t.name);
    // the dQ accumulator is added into
    if (t.reordered) MOEBENCH_CUDA_CHECK(cudaMemsetAsync(at, 0, g.dq_accum_bytes(), s));
    uids.push_back(t.uid);
    data.push_back(at);
  }
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(), std::int64_t(uids.size()));
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, data.data(), std::int64_t(data.size()));
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace);
  pack.finalize("variant pack");
  check(cudnnBackendExecute(c.handle, p.plan->get(), pack.get()), "execute the fused attention");
}

}  // namespace moebench
