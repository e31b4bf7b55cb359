// One rank's part of training the GPT model in a layout (pipeline/gpt_layout.h): its groups, its
// pipeline stage, the engine, the optimizers, and a fixed mini-batch of synthetic tokens;
// step() runs one training step -- 1F1B over the micro-batches, the tied embedding's gradient
// sum, data-parallel gradient synchronisation (ZeRO-1 where the layout says) and AdamW.
// Collective over the world it was made on.
#pragma once
#include <memory>
#include <vector>
#include "pipeline/gpt_layout.h"
#include "pipeline/data_parallel.h"
#include "pipeline/pipeline_engine.h"

namespace moebench {

class GptTrainer {
 public:
  // `sequences`: the mini-batch over all data-parallel ranks; `micro_batches` where PP > 1.
  GptTrainer(Communicator& world, Device& dev, Backend backend, const ParallelLayout& layout, const GptConfig& model,
             int sequences, int micro_batches);
  void step();
  const Stream& stream() const { return compute_; }
  int tokens_per_step() const { return tokens_; }
  // Device bytes this rank held at most (model states, optimizer, activations, temporaries)
  // since the last reset_peak_bytes() (as PyTorch's max_memory_allocated counts its tensors).
  std::size_t peak_bytes() const { return alloc_->peak_total(); }
  void reset_peak_bytes() { alloc_->reset_peaks(); }
  // The token rows this rank's experts computed in the last step, over its micro-batches.
  long long expert_rows() const;

 private:
  ParallelLayout layout_;
  LayoutGroups groups_;
  std::unique_ptr<TrackingAllocator> alloc_;
  Stream compute_, send_;
  std::unique_ptr<GptStage> stage_;
  std::unique_ptr<PipelineEngine> engine_;
  std::unique_ptr<DataParallelAdam> dense_opt_, moe_opt_;
  std::vector<Buffer> tokens_buf_, targets_buf_;
  int micro_ = 1, rows_ = 0, tokens_ = 0;
};

}  // namespace moebench
