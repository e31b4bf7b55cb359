// Megatron-style placement of ranks on a TP x DP x PP grid (TP fastest), with expert-parallel
// groups of `ep` consecutive data-parallel replicas. Colours feed Communicator::split.
#pragma once
#include <optional>
#include <string>

namespace moebench {

struct ParallelLayout {
  int tp = 1, pp = 1, dp = 1, ep = 1;
  int world() const { return tp * pp * dp; }

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
