// One pipeline stage: a run of residual MLP blocks, y = x + GeLU(x W1) W2 per block, that
// keeps each micro-batch's activations from its forward to its backward. The backward comes
// whole (B) or split as the zero-bubble schedules want it: backward_input (B: the input
// gradient, the critical path) then backward_weight (W: dW1 and dW2, deferrable). With
// recomputation a micro-batch keeps only its stage input, and its backward runs the forward again.
#pragma once
#include <cstdint>
#include <map>
#include <vector>
#include "kernels/dtype.h"
#include "pipeline/pipeline_stage.h"
#include "runtime/allocator.h"
#include "runtime/device.h"

namespace moebench {

struct MlpStageConfig {
  int hidden = 0;
  int ffn = 0;
  int layers = 0;       // blocks on this stage
  int first_layer = 0;  // the global index of its first block (a block's weights depend on it alone)
  DType dtype = DType::f32;
  bool recompute = false;
};

class MlpStage final : public PipelineStage {
 public:
  MlpStage(const MlpStageConfig& cfg, Device& dev, TrackingAllocator& alloc);
  // Weights from (seed, global block index): the same model on any number of stages.
  void init(std::uint64_t seed, const Stream& s);
  void zero_grad(const Stream& s);

  // x, y, dy, dx: [rows, hidden] in the stage's dtype, on the device.
  int width() const override { return cfg_.hidden; }
  void forward(int micro, const void* x, void* y, int rows, const Stream& s) override;
  void backward_input(int micro, const void* dy, void* dx, const Stream& s) override;  // B
  void backward_weight(int micro, const Stream& s) override;                           // W (after its B)

  const MlpStageConfig& config() const { return cfg_; }
  // [layers][hidden x ffn] and [layers][ffn x hidden], row-major, contiguous per kind.
  const Buffer& w1() const { return w1_; }
  const Buffer& w2() const { return w2_; }
  const Buffer& w1_grad() const { return dw1_; }
  const Buffer& w2_grad() const { return dw2_; }
  std::size_t weights_per_kind() const { return std::size_t(cfg_.layers) * cfg_.hidden * cfg_.ffn; }
  int micro_batches_held() const { return int(held_.size()); }

 private:
  struct Held {  // one micro-batch between its forward and its weight gradient
    int rows = 0;
    std::vector<Buffer> x, h, a;    // per block: input, x W1, GeLU of it (x[0] alone with recompute)
    std::vector<Buffer> dy, dh;     // per block, from B for W: the block's output and pre-GeLU gradients
  };
  void run_forward(Held& m, const Stream& s);  // fills x[1..], h, a from x[0]
  const void* w(const Buffer& b, int layer, std::size_t per) const;
  void* w(Buffer& b, int layer, std::size_t per);

  MlpStageConfig cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer w1_, w2_, dw1_, dw2_;
  std::map<int, Held> held_;
};

}  // namespace moebench
