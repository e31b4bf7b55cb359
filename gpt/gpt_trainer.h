// One rank's part of training the GPT model in a layout (gpt/gpt_layout.h): its groups, its
// pipeline stage, the engine, the optimizers, and a fixed mini-batch of synthetic tokens;
// step() runs one training step -- 1F1B over the micro-batches, the tied embedding's gradient
// sum, data-parallel gradient synchronisation (ZeRO-1 where the layout says) and AdamW -- enqueued
// with no host wait, or replayed from a graph of it (capture_step). Collective over the world it
// was made on.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>
#include "gpt/gpt_layout.h"
#include "gpt/data_parallel.h"
#include "pipeline/pipeline_engine.h"
#include "runtime/stream_graph.h"

namespace moebench {

class GptTrainer {
 public:
  // `sequences`: the mini-batch over all data-parallel ranks; `micro_batches` where PP > 1.
  GptTrainer(Communicator& world, Device& dev, Backend backend, const ParallelLayout& layout, const GptConfig& model,
             int sequences, int micro_batches);
  void step();
  // Captures the step into a graph (runtime/stream_graph.h) that every later step() replays.
  // One step runs eagerly first and is waited for, so that what a step keeps, the GEMM plans and
  // the optimizer's first-step conversions are settled; the next is captured, not run.
  // Collective. An MoE block whose experts take host counts (every --expert-gemm but segmented)
  // refuses: its gate waits for the counts and the expert GEMMs' shapes follow them (Error).
  void capture_step();
  bool step_captured() const { return graph_ != nullptr; }
  // Times the eager steps' parts into `b` (null: none), nested under gpt.step: step.zero_grad,
  // the stage's model.fwd, model.bwd and model.wgrad (GptStage::set_breakdown), and
  // step.optimizer. A replayed step times nothing, so once the step is captured this refuses
  // (Error).
  void set_breakdown(Breakdown* b);
  std::size_t graph_nodes() const { return graph_ ? graph_->nodes() : 0; }
  const Stream& stream() const { return compute_; }
  int tokens_per_step() const { return tokens_; }
  // Device bytes this rank held at most (model states, optimizer, activations, temporaries)
  // since the last reset_peak_bytes() (as PyTorch's max_memory_allocated counts its tensors); a
  // replayed step holds what its capture allocated at most.
  std::size_t peak_bytes() const { return std::max(alloc_->peak_total(), captured_peak_); }
  void reset_peak_bytes() { alloc_->reset_peaks(); }
  // Blocks this rank's pool has taken from the system so far (cudaMalloc on a GPU): a step that
  // takes one pays for the system's allocation, and on CUDA may wait for the device.
  std::int64_t pool_blocks_taken() const { return alloc_->system_allocations(); }
  // The token rows this rank's experts computed in the last step, over its micro-batches (0 with
  // --expert-gemm segmented: the counts stay on the device).
  long long expert_rows() const;
  // The rows its expert GEMMs computed for them, padding included (--expert-gemm padded).
  long long expert_computed_rows() const;
  // The last step's loss summed over this rank's tokens (the last pipeline stage only); waits
  // for the step.
  double loss_sum() { return stage_->loss_sum(compute_); }
  // This rank's trained parameters with their gradients.
  std::vector<TrainedParameter> parameters() { return stage_->trained_parameters(); }

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
  std::size_t captured_peak_ = 0;
  Breakdown* breakdown_ = nullptr;
  void enqueue_step();
  std::unique_ptr<StreamGraph> graph_;  // last: it goes before the buffers its replays use
};

}  // namespace moebench
