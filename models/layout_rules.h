// The trainer's rules for splitting a model over a layout's ranks, in one place: the transformer
// block and stage (gpt/) refuse by them, and the step model and moebench_whatif refuse what the
// trainer refuses, in the trainer's words.
#pragma once
#include <optional>
#include <string>
#include "models/layout.h"
#include "models/model_shape.h"

namespace moebench {

// --hidden, --heads and --ffn over `tp` tensor-parallel ranks: each at least 1, the heads dividing
// the hidden size, `tp` dividing the heads and the FFN width.
std::optional<std::string> block_split_error(int hidden, int heads, int ffn, int tp);
// --vocab, --seq and --layers at least 1, and `pp` stages holding the layers evenly.
std::optional<std::string> stage_split_error(int layers, int seq, int vocab, int pp);
// A layout of `kind` at DP x TP x PP for `shape`: an MoE layout needs experts; the stages and
// the blocks split evenly; the experts split over the row's group (expert_split.h). The trainer
// takes no `replicas`; the step model also prices a DP group that outnumbers its experts (000's
// DP256 rows over 64 experts), which moebench_whatif, projecting for the trainer, refuses.
std::optional<std::string> trainer_layout_error(const ModelShape& shape, LayoutKind kind, int dp, int tp, int pp,
                                                bool replicas = false);

}  // namespace moebench
