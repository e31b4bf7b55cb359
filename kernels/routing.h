// The gate's routing after its logits: softmax and top-k (kernels/gating.h), then each assignment's
// position and the routed and kept counts (kernels/capacity.h), as one op. On CUDA it is one
// cooperative kernel whose phases -- rows, tile histograms, the scan over tiles, the positions --
// meet at grid-wide barriers, where they were four launches: the gate's forward was launch-bound,
// the host issuing its ops slower than the device ran them (results/cuda, the gate's idle rows).
// With the aux loss on, its statistics (kernels/aux_loss.h) come out of the same pass: per chunk of
// a group's tokens in the blocks the histograms leave idle, then summed over the chunks in order,
// where they were a kernel of their own after the counts' copy.
// Where the rows need a block each (a prototype of more than kWarpExperts experts) or the device
// cannot launch cooperatively, the separate kernels run as before; on the CPU, the references.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include "kernels/capacity.h"
#include "kernels/exec.h"

namespace moebench {

struct RouteArgs {
  CapacityShape shape;
  const float* slices = nullptr;  // [T, 3E] from the weight's bf16 parts (kernels/bf16_split.h), or none:
  float* logits = nullptr;        // written from the slices, or else read
  float* probs = nullptr;         // [T, E]
  std::int32_t* expert = nullptr; // [T, S]
  float* weight = nullptr;        // [T, S]
  std::int32_t* position = nullptr;
  std::int32_t* routed = nullptr;  // [G, E]
  std::int32_t* kept = nullptr;    // [G, E]
  float* density = nullptr;        // [G, E] with proxy: the aux loss's statistics, or neither
  float* proxy = nullptr;
  void* workspace = nullptr;       // route_tokens_workspace_bytes()
  std::size_t workspace_bytes = 0;
};

// The one pass's chunks of a group's tokens for the aux statistics: at most 128, of at least 64
// tokens, so that their partial sums stay small beside the probabilities they sum.
inline int route_aux_chunks(int tokens_per_group) {
  const int by_size = (tokens_per_group + 63) / 64;
  return by_size < 1 ? 1 : by_size > 128 ? 128 : by_size;
}
// Device bytes of workspace route_tokens needs (0 on the CPU): assign_positions' and, with the
// aux statistics, their partial sums.
std::size_t route_tokens_workspace_bytes(const Exec& ex, const CapacityShape& c, bool aux);

// The most experts a prototype the one pass routes (a warp a row; cuda::kWarpExperts).
constexpr int kRouteOnePassMaxExperts = 256;
// How route_tokens runs on CUDA for this shape on the current device.
enum class RouteKernels { one_pass, separate };
RouteKernels route_tokens_kernels_cuda(const GateShape& g);
// --gate-kernels' names: one_pass, separate.
const char* route_kernels_name(RouteKernels k);
std::optional<RouteKernels> parse_route_kernels(const std::string& name);

void route_tokens_cuda(const RouteArgs& a, void* stream, RouteKernels kernels);
// kernels: CUDA only (--gate-kernels, and the tests that compare the two); by default the one pass
// where it can run.
void route_tokens(const Exec& ex, const RouteArgs& a);
void route_tokens(const Exec& ex, const RouteArgs& a, RouteKernels kernels);

}  // namespace moebench
