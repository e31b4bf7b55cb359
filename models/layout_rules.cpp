#include "models/layout_rules.h"
#include "models/expert_split.h"

namespace moebench {

std::optional<std::string> block_split_error(int hidden, int heads, int ffn, int tp) {
  if (hidden < 1 || heads < 1 || ffn < 1)
    return "--hidden, --heads and --ffn: " + std::to_string(hidden) + ", " + std::to_string(heads) + " and " +
           std::to_string(ffn) + "; allowed: >= 1";
  if (hidden % heads != 0) return "--heads: " + std::to_string(heads) + " does not divide the hidden size " + std::to_string(hidden);
  if (tp < 1 || heads % tp != 0) return "--tp: " + std::to_string(tp) + " does not divide the " + std::to_string(heads) + " heads";
  if (ffn % tp != 0) return "--tp: " + std::to_string(tp) + " does not divide the ffn size " + std::to_string(ffn);
  return std::nullopt;
}

std::optional<std::string> stage_split_error(int layers, int seq, int vocab, int pp) {
  if (vocab < 1 || seq < 1 || layers < 1)
    return "--vocab, --seq and --layers: " + std::to_string(vocab) + ", " + std::to_string(seq) + " and " +
           std::to_string(layers) + "; allowed: >= 1";
  if (pp < 1 || layers % pp != 0)
    return "--pp: " + std::to_string(pp) + " pipeline stages do not split the " + std::to_string(layers) +
           " layers evenly; allowed: a divisor of --layers";
  return std::nullopt;
}

std::optional<std::string> trainer_layout_error(const ModelShape& shape, LayoutKind kind, int dp, int tp, int pp,
                                                bool replicas) {
  const LayoutRow& row = layout_row(kind);
  if (row.experts_over != ExpertGroup::none && !shape.has_moe())
    return std::string("the ") + row.name + " layout needs a model with experts; this one has none";
  if (auto e = stage_split_error(shape.layers, shape.seq, shape.vocab, pp)) return e;
  if (auto e = block_split_error(shape.hidden, shape.heads, shape.ffn, tp)) return e;
  if (row.experts_over != ExpertGroup::none)
    return expert_split_error(shape.experts, expert_group_size(kind, dp, tp), row.group,
                              replicas && row.experts_over == ExpertGroup::dp);
  return std::nullopt;
}

}  // namespace moebench
