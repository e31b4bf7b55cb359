#include <cooperative_groups.h>
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include "kernels/capacity_tiles.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/gating.h"
#include "kernels/routing.h"
#include "kernels/softmax_topk_row.cuh"

namespace moebench {

constexpr int kRouteThreads = 256;

// The four phases of kernels/routing.h over one cooperative grid: each a grid-stride loop over its
// work items (rows and pairs by warp, tiles by block for the histogram, by warp for the positions),
// then a grid-wide barrier, which also makes the phase's writes visible to the next.
template <int kPer>
__global__ void __launch_bounds__(kRouteThreads)
    route_tokens_kernel(cuda::Sequence sq, int capacity, const float* slices, float* logits, float* probs, int* expert,
                        float* weight, int* counts, int* position, int* routed, int* kept) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const long long warps_per_block = blockDim.x >> 5;
  const long long warp = blockIdx.x * warps_per_block + (threadIdx.x >> 5), warps = gridDim.x * warps_per_block;
  const long long rows = (long long)sq.g.tokens * sq.g.prototypes;
  for (long long row = warp; row < rows; row += warps)  // warp-uniform: whole warps take a row
    cuda::warp_softmax_topk_row<kPer>(sq.g, row, slices, logits, probs, expert, weight);
  grid.sync();
  for (int item = blockIdx.x; item < sq.tile_items(); item += gridDim.x)  // block-uniform: its barriers
    cuda::tile_histogram(sq, item, expert, counts);
  grid.sync();
  for (long long i = warp; i < sq.pairs(); i += warps) cuda::tile_offsets(sq, capacity, int(i), counts, routed, kept);
  grid.sync();
  for (long long w = warp; w < sq.tile_items(); w += warps)
    cuda::tile_positions(sq, capacity, int(w), expert, counts, position);
}

namespace {

// Whether the device launches cooperatively, and how many blocks of the kernel fit on it at once
// (a cooperative grid may not exceed that): asked once per device and register width.
struct CooperativeFit {
  bool supported = false;
  int blocks_per_sm = 0, sms = 0;
};

template <int kPer>
CooperativeFit cooperative_fit() {
  static std::mutex mutex;
  static std::map<int, CooperativeFit> by_device;
  int device = 0;
  MOEBENCH_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = by_device.find(device);
  if (it != by_device.end()) return it->second;
  CooperativeFit f;
  int cooperative = 0;
  MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  MOEBENCH_CUDA_CHECK(cudaDeviceGetAttribute(&f.sms, cudaDevAttrMultiProcessorCount, device));
  MOEBENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&f.blocks_per_sm, route_tokens_kernel<kPer>,
                                                                    kRouteThreads, 0));
  f.supported = cooperative != 0 && f.blocks_per_sm > 0;
  return by_device.emplace(device, f).first->second;
}

// The grid: as many blocks as the largest phase has work for, at most four per SM (more blocks
// hide the rows' loads; each makes every grid barrier dearer) and at most what fits at once.
unsigned route_blocks(const cuda::Sequence& sq, const CooperativeFit& fit) {
  const long long per_block = kRouteThreads / 32;
  const long long rows = (long long)sq.g.tokens * sq.g.prototypes;
  const long long want = std::max({(rows + per_block - 1) / per_block, (long long)sq.tile_items(),
                                   ((long long)sq.pairs() + per_block - 1) / per_block, 1LL});
  const long long cap = (long long)fit.sms * std::min(fit.blocks_per_sm, 4);
  return unsigned(std::min(want, cap));
}

template <int kPer>
void launch_route(const RouteArgs& a, const cuda::Sequence& sq, cudaStream_t s) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(route_blocks(sq, cooperative_fit<kPer>()));
  config.blockDim = dim3(kRouteThreads);
  config.stream = s;
  cudaLaunchAttribute cooperative[1];
  cooperative[0].id = cudaLaunchAttributeCooperative;
  cooperative[0].val.cooperative = 1;
  config.attrs = cooperative;
  config.numAttrs = 1;
  MOEBENCH_CUDA_CHECK(cudaLaunchKernelEx(&config, route_tokens_kernel<kPer>, sq, a.shape.capacity, a.slices, a.logits,
                                         a.probs, a.expert, a.weight, static_cast<int*>(a.workspace), a.position,
                                         a.routed, a.kept));
}

template <class F>
auto by_width(int per_prototype, F&& f) {
  if (per_prototype <= 32) return f(std::integral_constant<int, 1>{});
  if (per_prototype <= 64) return f(std::integral_constant<int, 2>{});
  if (per_prototype <= 128) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

}  // namespace

RouteKernels route_tokens_kernels_cuda(const GateShape& g) {
  static_assert(cuda::kWarpExperts == 256, "by_width covers kWarpExperts");
  if (g.per_prototype() > cuda::kWarpExperts) return RouteKernels::separate;
  const bool fits = by_width(g.per_prototype(), [](auto per) { return cooperative_fit<decltype(per)::value>().supported; });
  return fits ? RouteKernels::one_pass : RouteKernels::separate;
}

void route_tokens_cuda(const RouteArgs& a, void* stream, RouteKernels kernels) {
  const CapacityShape& c = a.shape;
  const auto s = static_cast<cudaStream_t>(stream);
  if (kernels == RouteKernels::separate) {
    if (a.slices)
      softmax_topk_from_slices_cuda(c.gate, a.slices, a.logits, a.probs, a.expert, a.weight, stream);
    else
      softmax_topk_cuda(c.gate, a.logits, a.probs, a.expert, a.weight, stream);
    return assign_positions_cuda(c, a.expert, a.position, a.routed, a.kept, a.workspace, a.workspace_bytes, stream);
  }
  if (c.gate.per_prototype() > cuda::kWarpExperts)
    throw Error("route_tokens: one pass takes at most " + std::to_string(cuda::kWarpExperts) + " experts a prototype, not " +
                std::to_string(c.gate.per_prototype()));
  if (c.gate.experts == 0 || c.groups == 0) return;
  const std::size_t need = assign_positions_workspace_bytes(Exec{Backend::cuda}, c);
  if (need > a.workspace_bytes)
    throw Error("route_tokens: workspace of " + std::to_string(a.workspace_bytes) + " bytes, needs " + std::to_string(need));
  const cuda::Sequence sq = cuda::capacity_sequence(c);
  by_width(c.gate.per_prototype(), [&](auto per) { launch_route<decltype(per)::value>(a, sq, s); });
}

}  // namespace moebench
