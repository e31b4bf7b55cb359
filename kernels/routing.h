// The gate's routing after its logits: softmax and top-k (kernels/gating.h), then each assignment's
// position and the routed and kept counts (kernels/capacity.h), as one op. On CUDA it is one
// cooperative kernel whose phases -- rows, tile histograms, the scan over tiles, the positions --
// meet at grid-wide barriers, where they were four launches: the gate's forward was launch-bound,
// the host issuing its ops slower than the device ran them (results/cuda, the gate's idle rows).
// Where the rows need a block each (a prototype of more than kWarpExperts experts) or the device
// cannot launch cooperatively, the four kernels run as before; on the CPU, the references.
#pragma once
#include <cstddef>
#include <cstdint>
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
  void* workspace = nullptr;       // assign_positions_workspace_bytes()
  std::size_t workspace_bytes = 0;
};

// How route_tokens runs on CUDA for this shape on the current device.
enum class RouteKernels { one_pass, separate };
RouteKernels route_tokens_kernels_cuda(const GateShape& g);

void route_tokens_cuda(const RouteArgs& a, void* stream, RouteKernels kernels);
// kernels: CUDA only, for tests that compare the two; by default the one pass where it can run.
void route_tokens(const Exec& ex, const RouteArgs& a);
void route_tokens(const Exec& ex, const RouteArgs& a, RouteKernels kernels);

}  // namespace moebench
