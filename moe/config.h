// What one MoE layer is: sizes, gating (top-k, prototypes), capacity and aux loss, and
// how the local experts compute. validate() names the option at fault.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "kernels/dtype.h"
#include "kernels/exec.h"
#include "kernels/grouped_gemm.h"
#include "kernels/routing.h"

namespace moebench {

// How the gate routes: `fused` -- one softmax + top-k kernel per (token, prototype) and index
// dispatch (ours); `paper` -- M6-T's own gate (Fig. 8, GShard-style): k rounds of arg-max with
// dense one-hot masks, a [T, E, C] combine tensor, and dispatch and combine as einsums over it
// (kernels/looped_gating.h, moe/one_hot_dispatch.h). Both route identically.
enum class GateImpl { fused, paper };
inline const char* gate_impl_name(GateImpl g) { return g == GateImpl::fused ? "fused" : "paper"; }
// --gate's choices, "fused" then "paper", and back from a name.
std::vector<std::string> gate_impl_names();
std::optional<GateImpl> parse_gate_impl(const std::string& name);

// The routes and their names: kernels/expert_gemm_routes.h (included through grouped_gemm.h).
// The route a run takes unless --expert-gemm names one. On the GPU: padded, the fastest route
// measured there at every popularity, where its cuBLASLt epilogue takes the FFN width (a multiple
// of 8). Else -- and on the CPU, where padding rows are only more work -- grouped.
ExpertGemm default_expert_gemm(Backend backend, int ffn);

// What the padded route's layout costs, in rows of its batched GEMMs (moe/padded_blocks.h).
struct PaddedBlockCost {
  // One expert's rows sent to GEMMs of their own: six launches and their tails, beyond the rows'
  // own work. About 384 rows at the paper's widths on a Hopper GPU (the overflow GEMMs of the
  // kernel tables in results/cuda/targets, against the batched GEMMs' time per row).
  int overflow_rows = 384;
  // The GEMMs' row tile: blocks whose heights round up to the same multiple cost alike, and are
  // made as tall as that multiple.
  int row_tile = 64;
};

struct MoEConfig {
  int hidden = 768;
  int ffn = 3072;
  int experts = 16;
  int prototypes = 1;  // Z: M6-T expert prototyping; 1 = plain top-k
  int top_k = 1;       // k inside each prototype
  std::optional<double> capacity_factor;  // gamma of M6-T Eq. 2; nullopt = dropless (as PPMoE)
  bool aux_loss = true;
  float aux_coef = 0.01f;
  ExpertGemm expert_gemm = ExpertGemm::grouped;
  GateImpl gate = GateImpl::fused;
  // The fused gate's routing kernels on CUDA (--gate-kernels, to measure one beside the other);
  // nullopt: the one pass where it can run (kernels/routing.h).
  std::optional<RouteKernels> gate_kernels;
  DType dtype = DType::f32;
  // The experts keep GeLU's output for backward (true), or only its input -- MPMoE's T_M, one
  // [rows, f] tensor as the paper's in-place ReLU -- and recompute the output in backward.
  bool keep_expert_activation = true;
  PaddedBlockCost padded_cost;  // --expert-gemm padded: how its blocks' height is chosen

  int slots() const { return prototypes * top_k; }
  int per_prototype() const { return experts / prototypes; }
  // tokens: per rank; expert_ranks: ranks the experts are split over.
  std::optional<std::string> validate(int tokens, int expert_ranks) const;
  // What `backend` cannot compute: cuBLAS's grouped GEMM reads 16-byte aligned per-expert row
  // pointers, so 16-bit grouped experts need h and f to be multiples of 8.
  std::optional<std::string> validate_for(Backend backend) const;
  // How the gate routes on `backend`, as the rows record it: the fused gate's CUDA kernels
  // (one_pass or separate, as chosen for this shape and device), cpu_op for its one CPU op, or
  // arg_max_rounds for the paper gate.
  std::string gate_kernels_name(Backend backend) const;
};

}  // namespace moebench
