// A decoder-only language model (GPT-2/3): token and position embeddings, pre-norm blocks, a
// final LayerNorm and the output layer tied to the token embedding, trained on next-token
// cross-entropy. One micro-batch's forward and backward at a time; gradients accumulate, so M
// micro-batches with grad_scale = 1 / (tokens of the mini-batch) give the mini-batch's gradient.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>
#include "pipeline/transformer_block.h"

namespace moebench {

struct GptConfig {
  int vocab = 0, seq = 0, hidden = 0, heads = 0, ffn = 0, layers = 0;
};

class GptModel {
 public:
  GptModel(const GptConfig& cfg, Device& dev, TrackingAllocator& alloc);
  void init(std::uint64_t seed, const Stream& s);
  void zero_grad(const Stream& s);

  // tokens, targets: [sequences x seq] int32 on the device. Adds this micro-batch's gradient of
  // grad_scale x (sum of its token losses) to the parameters' gradients; returns that sum.
  double forward_backward(const std::int32_t* tokens, const std::int32_t* targets, int sequences, float grad_scale,
                          const Stream& s);

  const GptConfig& config() const { return cfg_; }
  // Every parameter and its gradient (embeddings, blocks in order, final LayerNorm).
  std::vector<std::pair<Buffer*, Buffer*>> parameters();

 private:
  GptConfig cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer table_, positions_, gf_, bf_, dtable_, dpositions_, dgf_, dbf_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
};

}  // namespace moebench
