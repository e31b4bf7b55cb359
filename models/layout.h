// The one rank layout of the suite: where the MoE layers' experts live (000 Table 2's Dense,
// DPMoE, PPMoE: one row each of layout_table()), Megatron-style placement of ranks on a TP x DP x
// PP grid (TP fastest), expert-parallel groups of `ep` consecutive data-parallel replicas, and
// ZeRO-1. The benches, the trainer, the step model and the projections all take it. Colours feed
// Communicator::split.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace moebench {

// Dense: no MoE layer; DPMoE: the experts split over the data-parallel group (EP = DP), two
// all-to-alls per layer; PPMoE: the experts inside the tensor-parallel group (000 Algorithm 1).
enum class LayoutKind { dense, dpmoe, ppmoe };

// The ranks a layout splits its experts over.
enum class ExpertGroup { none, dp, tp };

// One row per layout kind: every program's --layout takes its choices, its help and its
// parsing from here, and the trainer and the step model their expert group.
struct LayoutRow {
  LayoutKind kind;
  const char* option;  // --layout's value: "dense"
  const char* name;    // as tables and layouts print it: "Dense"
  ExpertGroup experts_over;
  const char* group;   // that group in messages: "the EP (= DP) group"
  const char* what;    // one line for --layout's help
};
const std::vector<LayoutRow>& layout_table();
const LayoutRow& layout_row(LayoutKind k);
const char* layout_kind_name(LayoutKind k);     // the row's name: "Dense", "DPMoE", "PPMoE"
std::vector<std::string> layout_options();      // the rows' options, in the table's order
std::string layout_options_help();              // "dense (...), dpmoe (...), ppmoe (...)"
std::optional<LayoutKind> parse_layout_option(const std::string& option);  // "dpmoe"
std::optional<LayoutKind> parse_layout_name(const std::string& name);      // "DPMoE"
// The size of the group a layout of `kind` splits its experts over (1 for none).
int expert_group_size(LayoutKind kind, int dp, int tp);

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
