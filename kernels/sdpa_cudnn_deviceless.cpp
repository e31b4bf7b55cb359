// Which of cuDNN's engines take an attention graph on a GPU that is not here: the graph lowered
// without a handle, and heuristics asked for the device that serialized properties describe
// (cuDNN 9.8+). Heuristics offer only engines whose support check passed for that graph and
// device, and each offered engine's plan is then built up to loading its kernels; an engine
// counts when that got so far. An empty answer says the graph would find no engine there. cuDNN
// loads libcuda to open its engines; with no driver installed, the CUDA toolkit's stub serves.
#include "kernels/sdpa.h"
#include "kernels/sdpa_cudnn_lowering.h"

namespace moebench {

using namespace cudnn_backend;

std::vector<long long> sdpa_cudnn_engines(const SdpaGraph& g, const std::string& device_json) {
  Descriptor device(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  device.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, device_json.data(), std::int64_t(device_json.size()));
  device.finalize("device properties");
  const Lowered l = lower(g, nullptr);
  std::string tried;
  std::vector<long long> engines;
  for (const Owned& config : engine_configs(l, CUDNN_HEUR_MODE_A, &device, tried)) {
    // The plan is built as far as this machine allows: every check and any run-time compilation
    // of the engine's kernels, up to loading them, which needs the driver (the stub refuses).
    Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, *config);
    plan.set(CUDNN_ATTR_EXECUTION_PLAN_DEVICEPROP, device);
    const cudnnStatus_t s = cudnnBackendFinalize(plan.get());
    if (s == CUDNN_STATUS_SUCCESS || s == CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER) engines.push_back(engine_index(*config));
  }
  return engines;
}

}  // namespace moebench
