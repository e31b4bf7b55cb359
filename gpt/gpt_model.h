// The decoder-only language model (GPT-2/3) whole on one rank: the one-stage pipeline of
// gpt_stage.h, one micro-batch's forward and backward at a time. Gradients accumulate, so M
// micro-batches with grad_scale = 1 / (tokens of the mini-batch) give the mini-batch's gradient.
#pragma once
#include <cstdint>
#include <vector>
#include "gpt/gpt_stage.h"

namespace moebench {

class GptModel {
 public:
  GptModel(const GptConfig& cfg, Device& dev, TrackingAllocator& alloc, Communicator* tp = nullptr,
           const DispatcherFactory& dispatcher = {})
      : stage_(cfg, 0, 1, dev, alloc, tp, dispatcher) {}
  void init(std::uint64_t seed, const Stream& s) { stage_.init(seed, s); }
  void zero_grad(const Stream& s) { stage_.zero_grad(s); }
  void set_loss_scale(float scale) { stage_.set_loss_scale(scale); }  // GptStage::set_loss_scale

  // tokens, targets: [sequences x seq] int32 on the device. Adds this micro-batch's gradient of
  // grad_scale x (sum of its token losses) to the parameters' gradients; returns that sum.
  double forward_backward(const std::int32_t* tokens, const std::int32_t* targets, int sequences, float grad_scale,
                          const Stream& s);

  // Every parameter and its gradient (embeddings, blocks in order, final LayerNorm).
  std::vector<std::pair<Buffer*, Buffer*>> parameters() { return stage_.parameters(); }
  std::vector<TrainedParameter> trained_parameters() { return stage_.trained_parameters(); }
  // The token rows this rank's experts computed in the last forward (GptStage::expert_rows).
  long long expert_rows() const { return stage_.expert_rows(0); }

 private:
  GptStage stage_;
};

}  // namespace moebench
