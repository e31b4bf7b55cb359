// What running the GPT model in a layout of PPMoE Table 2 (models/layout.h: Dense, DPMoE or
// PPMoE over DP x TP x PP ranks, with or without ZeRO-1) needs: the ranks' groups, the model (the
// backbone, or an MoE layer on every other FFN) and its MoE blocks' dispatcher.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "gpt/gpt_stage.h"
#include "comm/comm.h"
#include "models/layout.h"
#include "runtime/runtime.h"

namespace moebench {

// The layout's communicators and this rank's place in them (ParallelLayout's placement: TP groups
// are neighbours, as within a node).
struct LayoutGroups {
  std::unique_ptr<Communicator> tp, dp, pp;
  int stage = 0, dp_rank = 0, tp_rank = 0;
};
LayoutGroups make_layout_groups(Communicator& world, const ParallelLayout& layout);

// The model a layout runs: `shape` with its MoE layers for DPMoE and PPMoE, its dense
// counterpart (shape.dense()) for Dense.
GptConfig layout_model(const ModelShape& shape, const ParallelLayout& layout, DType dtype = DType::f32);
// The MoE blocks' dispatcher: DPMoE's all-to-all over the DP group, PPMoE's index-select and
// all-reduce over the TP group; none for Dense.
DispatcherFactory layout_dispatcher(const ParallelLayout& layout, LayoutGroups& groups);
// `rows` synthetic token ids in [0, vocab) on the device, the same for (seed, id) on any rank
// count: a data-parallel rank's micro-batch of tokens (seed 7) or of targets (seed 8).
Buffer synthetic_tokens(Device& dev, TrackingAllocator& alloc, const Stream& s, int rows, int vocab, std::uint64_t seed,
                        std::uint64_t id);

// Collective over every rank: how routing spread the experts' work -- the busiest rank's expert
// rows over the mean rank's, given this rank's `rows`; nullopt where no rank computed any.
std::optional<double> expert_load(const Runtime& rt, std::int64_t rows);

// Why `layout` cannot run the model on `world_size` ranks, naming the option; nullopt if it can.
std::optional<std::string> validate_layout(const ParallelLayout& layout, const ModelShape& shape, int world_size);

}  // namespace moebench
