// The one rank layout of the suite: where the MoE layers' experts live (000 Table 2's Dense,
// DPMoE, PPMoE), Megatron-style placement of ranks on a TP x DP x PP grid (TP fastest), expert-
// parallel groups of `ep` consecutive data-parallel replicas, and ZeRO-1. The benches, the
// trainer, the step model and the projections all take it. Colours feed Communicator::split.
#pragma once
#include <optional>
#include <string>

namespace moebench {

// Dense: no MoE layer; DPMoE: the experts split over the data-parallel group (EP = DP), two
// all-to-alls per layer; PPMoE: the experts inside the tensor-parallel group (000 Algorithm 1).
enum class LayoutKind { dense, dpmoe, ppmoe };
const char* layout_kind_name(LayoutKind k);  // "Dense", "DPMoE", "PPMoE"

struct ParallelLayout {
  LayoutKind kind = LayoutKind::dense;
  int tp = 1, pp = 1, dp = 1, ep = 1;
  bool zero = false;  // ZeRO-1 over the data-parallel group
  int world() const { return tp * pp * dp; }
  // A model's layout by its sizes (DPMoE's expert-parallel group is its data-parallel group).
  static ParallelLayout of(LayoutKind kind, int dp, int tp, int pp, bool zero = false) {
    ParallelLayout l;
    l.kind = kind;
    l.dp = dp;
    l.tp = tp;
    l.pp = pp;
    l.ep = kind == LayoutKind::dpmoe ? dp : 1;
    l.zero = zero;
    return l;
  }
  // "DPMoE DP2 TP2 PP1 ZeRO"
  std::string describe() const;

  // dp is world / (tp * pp). Returns an error naming the option when the world cannot be
  // laid out so (sizes < 1, tp*pp not dividing the world, ep not dividing dp).
  static std::optional<std::string> make(int world, int tp, int pp, int ep, ParallelLayout* out);

  int tp_index(int rank) const { return rank % tp; }
  int dp_index(int rank) const { return (rank / tp) % dp; }
  int pp_index(int rank) const { return rank / (tp * dp); }

  // Ranks sharing a colour form one group; the key orders them inside it.
  int tp_color(int rank) const { return pp_index(rank) * dp + dp_index(rank); }
  int dp_color(int rank) const { return pp_index(rank) * tp + tp_index(rank); }
  int pp_color(int rank) const { return dp_index(rank) * tp + tp_index(rank); }
  int ep_color(int rank) const { return (pp_index(rank) * (dp / ep) + dp_index(rank) / ep) * tp + tp_index(rank); }
};

}  // namespace moebench
