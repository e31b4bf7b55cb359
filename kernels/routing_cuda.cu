#include <cooperative_groups.h>
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>
#include "kernels/aux_loss.h"
#include "kernels/capacity_tiles.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/gating.h"
#include "kernels/routing.h"
#include "kernels/softmax_topk_row.cuh"

namespace moebench {

constexpr int kRouteThreads = 256;

// The aux statistics' partial sums (kernels/aux_loss.h): [G][chunks][2][E], each chunk's
// probability sums, then its first-choice counts; or none.
struct AuxParts {
  float* sums = nullptr;
  int chunks = 0, per_chunk = 0;
};

// Item (group, chunk), the whole block: expert e's probabilities and first choices summed over the
// chunk's tokens, `lanes` threads an expert taking every lanes-th token, their sums then added in
// lane order (one order every run: no atomics).
__device__ __forceinline__ void aux_chunk(const cuda::Sequence& sq, const AuxParts& p, int item, const float* probs,
                                          const int* expert) {
  __shared__ float lane_sums[2][kRouteThreads];
  const int E = sq.g.experts, F = E / sq.g.prototypes, S = sq.g.prototypes * sq.g.k;
  const int gr = item / p.chunks, c = item % p.chunks;
  const int first = gr * sq.per_group + c * p.per_chunk, last = min((gr + 1) * sq.per_group, first + p.per_chunk);
  float* out = p.sums + (size_t(gr) * p.chunks + c) * 2 * E;
  const int lanes = E < int(blockDim.x) ? int(blockDim.x) / E : 1;
  for (int e0 = 0; e0 < E; e0 += int(blockDim.x) / lanes) {  // E above the block: a pass per blockDim experts
    const int e = e0 + int(threadIdx.x) % (int(blockDim.x) / lanes), lane = int(threadIdx.x) / (int(blockDim.x) / lanes);
    float ps = 0.f, ds = 0.f;
    if (e < E && lane < lanes) {
      const size_t choice = size_t(e / F) * sq.g.k;  // the first choice of e's prototype
#pragma unroll 4
      for (int t = first + lane; t < last; t += lanes) {
        ps += probs[size_t(t) * E + e];
        ds += expert[size_t(t) * S + choice] == e ? 1.f : 0.f;
      }
    }
    lane_sums[0][threadIdx.x] = ps;
    lane_sums[1][threadIdx.x] = ds;
    __syncthreads();
    if (lane == 0 && e < E) {
      const int width = int(blockDim.x) / lanes;
      for (int l = 1; l < lanes; ++l) ps += lane_sums[0][l * width + threadIdx.x], ds += lane_sums[1][l * width + threadIdx.x];
      out[e] = ps;
      out[E + e] = ds;
    }
    __syncthreads();  // read before the next pass or item writes them
  }
}

// Pair i = (group, expert), one thread: the chunks' sums added in chunk order, over the group's tokens.
__device__ __forceinline__ void aux_total(const cuda::Sequence& sq, const AuxParts& p, int i, float* density,
                                          float* proxy) {
  const int E = sq.g.experts, gr = i / E, e = i % E;
  float ps = 0.f, ds = 0.f;
  for (int c = 0; c < p.chunks; ++c) {
    const float* part = p.sums + (size_t(gr) * p.chunks + c) * 2 * E;
    ps += part[e];
    ds += part[E + e];
  }
  density[i] = ds / float(sq.per_group);
  proxy[i] = ps / float(sq.per_group);
}

// The phases of kernels/routing.h over one cooperative grid: each a grid-stride loop over its work
// items (rows and pairs by warp, tiles and aux chunks by block for the histogram and the partial
// sums, tiles by warp for the positions), then a grid-wide barrier, which also makes the phase's
// writes visible to the next.
template <int kPer>
__global__ void __launch_bounds__(kRouteThreads)
    route_tokens_kernel(cuda::Sequence sq, int capacity, const float* slices, float* logits, float* probs, int* expert,
                        float* weight, int* counts, int* position, int* routed, int* kept, AuxParts aux,
                        float* density, float* proxy) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  const long long warps_per_block = blockDim.x >> 5;
  const long long warp = blockIdx.x * warps_per_block + (threadIdx.x >> 5), warps = gridDim.x * warps_per_block;
  const long long rows = (long long)sq.g.tokens * sq.g.prototypes;
  for (long long row = warp; row < rows; row += warps)  // warp-uniform: whole warps take a row
    cuda::warp_softmax_topk_row<kPer>(sq.g, row, slices, logits, probs, expert, weight);
  grid.sync();
  const int aux_items = aux.sums ? sq.groups * aux.chunks : 0;
  for (int item = blockIdx.x; item < sq.tile_items() + aux_items; item += gridDim.x) {  // block-uniform: barriers
    if (item < sq.tile_items())
      cuda::tile_histogram(sq, item, expert, counts);
    else
      aux_chunk(sq, aux, item - sq.tile_items(), probs, expert);
  }
  grid.sync();
  for (long long i = warp; i < sq.pairs(); i += warps) cuda::tile_offsets(sq, capacity, int(i), counts, routed, kept);
  if (aux.sums)
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < sq.pairs(); i += gridDim.x * (long long)blockDim.x)
      aux_total(sq, aux, int(i), density, proxy);
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
unsigned route_blocks(const cuda::Sequence& sq, const AuxParts& aux, const CooperativeFit& fit) {
  const long long per_block = kRouteThreads / 32;
  const long long rows = (long long)sq.g.tokens * sq.g.prototypes;
  const long long blocks_of_items = (long long)sq.tile_items() + (aux.sums ? (long long)sq.groups * aux.chunks : 0);
  const long long want = std::max({(rows + per_block - 1) / per_block, blocks_of_items,
                                   ((long long)sq.pairs() + per_block - 1) / per_block, 1LL});
  const long long cap = (long long)fit.sms * std::min(fit.blocks_per_sm, 4);
  return unsigned(std::min(want, cap));
}

template <int kPer>
void launch_route(const RouteArgs& a, const cuda::Sequence& sq, const AuxParts& aux, cudaStream_t s) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(route_blocks(sq, aux, cooperative_fit<kPer>()));
  config.blockDim = dim3(kRouteThreads);
  config.stream = s;
  cudaLaunchAttribute cooperative[1];
  cooperative[0].id = cudaLaunchAttributeCooperative;
  cooperative[0].val.cooperative = 1;
  config.attrs = cooperative;
  config.numAttrs = 1;
  MOEBENCH_CUDA_CHECK(cudaLaunchKernelEx(&config, route_tokens_kernel<kPer>, sq, a.shape.capacity, a.slices, a.logits,
                                         a.probs, a.expert, a.weight, static_cast<int*>(a.workspace), a.position,
                                         a.routed, a.kept, aux, a.density, a.proxy));
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
  static_assert(kRouteOnePassMaxExperts == cuda::kWarpExperts, "routing.h's limit is the kernel's");
  if (g.per_prototype() > cuda::kWarpExperts) return RouteKernels::separate;
  const bool fits = by_width(g.per_prototype(), [](auto per) { return cooperative_fit<decltype(per)::value>().supported; });
  return fits ? RouteKernels::one_pass : RouteKernels::separate;
}

void route_tokens_cuda(const RouteArgs& a, void* stream, RouteKernels kernels) {
  const CapacityShape& c = a.shape;
  const auto s = static_cast<cudaStream_t>(stream);
  if ((a.density == nullptr) != (a.proxy == nullptr))
    throw Error("route_tokens: the aux statistics take both density and proxy, or neither");
  if (kernels == RouteKernels::separate) {
    if (a.slices)
      softmax_topk_from_slices_cuda(c.gate, a.slices, a.logits, a.probs, a.expert, a.weight, stream);
    else
      softmax_topk_cuda(c.gate, a.logits, a.probs, a.expert, a.weight, stream);
    assign_positions_cuda(c, a.expert, a.position, a.routed, a.kept, a.workspace, a.workspace_bytes, stream);
    if (a.density) aux_loss_stats_cuda(c.gate, c.groups, a.probs, a.expert, a.density, a.proxy, stream);
    return;
  }
  if (c.gate.per_prototype() > cuda::kWarpExperts)
    throw Error("route_tokens: one pass takes at most " + std::to_string(cuda::kWarpExperts) + " experts a prototype, not " +
                std::to_string(c.gate.per_prototype()));
  if (c.gate.experts == 0 || c.groups == 0) return;
  const std::size_t need = route_tokens_workspace_bytes(Exec{Backend::cuda}, c, a.density != nullptr);
  if (need > a.workspace_bytes)
    throw Error("route_tokens: workspace of " + std::to_string(a.workspace_bytes) + " bytes, needs " + std::to_string(need));
  const cuda::Sequence sq = cuda::capacity_sequence(c);
  AuxParts aux;
  if (a.density) {
    aux.chunks = route_aux_chunks(sq.per_group);
    aux.per_chunk = (sq.per_group + aux.chunks - 1) / aux.chunks;
    aux.sums = reinterpret_cast<float*>(static_cast<char*>(a.workspace) + assign_positions_workspace_bytes(Exec{Backend::cuda}, c));
  }
  by_width(c.gate.per_prototype(), [&](auto per) { launch_route<decltype(per)::value>(a, sq, aux, s); });
}

}  // namespace moebench
