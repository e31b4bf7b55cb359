// The attention graphs (kernels/sdpa_graph.h) run through cuDNN: the graph lowered to backend
// descriptors (kernels/sdpa_cudnn_lowering.h), and the first engine configuration heuristics
// offer that finalizes on this device becomes the execution plan, kept per thread, device and
// graph. A run binds the non-virtual tensors' uids to memory in a variant pack.
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "kernels/cuda_check.cuh"
#include "kernels/sdpa.h"
#include "kernels/sdpa_cudnn_lowering.h"

namespace moebench {

using namespace cudnn_backend;

namespace {

// An execution plan and everything it was built from, which it refers to.
struct Plan {
  SdpaGraph graph;  // its by-value scalars are read from here at each run
  Lowered lowered;
  Owned config, plan;
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
  p->lowered = lower(g, handle);
  std::string tried;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    std::vector<Owned> configs = engine_configs(p->lowered, mode, nullptr, tried);
    for (std::size_t i = 0; i < configs.size() && !p->plan; ++i) {
      auto plan = std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &handle);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *configs[i]);
      if (const cudnnStatus_t s = cudnnBackendFinalize(plan->get()); s != CUDNN_STATUS_SUCCESS) {
        tried += " engine " + std::to_string(engine_index(*configs[i])) + ": " + cudnnGetErrorString(s) + last_error() + ";";
        continue;
      }
      std::int64_t got = 0;
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &got,
                                     &p->workspace),
            "plan workspace size");
      p->plan = std::move(plan);
      p->config = std::move(configs[i]);
    }
    if (p->plan) return p;
  }
  throw Error("cuDNN (version " + std::to_string(cudnnGetVersion()) + ") has no engine for the fused attention graph of " +
              std::to_string(g.ops.size()) + " ops:" + tried + "\n" + describe_sdpa_graph(g));
}

Plan& plan_for(const SdpaGraph& g) {
  Context& c = context();
  std::unique_ptr<Plan>& p = c.plans[key(g)];
  if (!p) p = build(g, c.handle);
  return *p;
}

}  // namespace

bool sdpa_cudnn_built() { return true; }

std::string sdpa_cudnn_device_json() {
  Descriptor device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  cudnnHandle_t handle = context().handle;
  device.set(CUDNN_ATTR_DEVICEPROP_HANDLE, CUDNN_TYPE_HANDLE, &handle);
  device.finalize("this device's properties");
  std::int64_t size = 0;
  check(cudnnBackendGetAttribute(device.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, 0, &size, nullptr),
        "device properties' size");
  std::string json(std::size_t(size), '\0');
  check(cudnnBackendGetAttribute(device.get(), CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, size, &size,
                                 json.data()),
        "device properties");
  json.resize(std::size_t(size));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

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
