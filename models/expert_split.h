// How experts split over a group of ranks: each of the group's ranks holds experts / group of them.
// One rule for the MoE layer's config (the expert-parallel ranks), the trainer's layouts (DPMoE's
// DP group, PPMoE's TP group), the step model and moebench_whatif, with one message.
#pragma once
#include <optional>
#include <string>

namespace moebench {

// Why `experts` do not split over `group` ranks, or nullopt. `what`: the group, as the message
// names it ("" for plain ranks, or "the EP (= DP) group"). `replicas`: a group may also
// outnumber the experts, each expert held by group / experts ranks (000's DP256 over 64 experts in
// the step model); the suite's layer and trainer do not run that.
std::optional<std::string> expert_split_error(int experts, int group, const std::string& what, bool replicas = false);

}  // namespace moebench
