// The local experts: FFN h -> f -> h with GeLU, no biases (as the M6-T pseudo code), one
// weight pair per expert. Rows arrive expert-major ([rows of expert 0][rows of expert 1]...)
// and all experts run through one grouped GEMM call per step, or one GEMM after another
// (cfg.expert_gemm). Backward fills the weight gradients and returns the row gradients.
#pragma once
#include <cstdint>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "moe/config.h"

namespace moebench {

class Experts {
 public:
  Experts(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, int first_expert, int count);
  // Weights of global expert e come from the stream (seed, e): the same on any layout.
  void init(std::uint64_t seed);

  // x [R, h] -> y [R, h] with R = sum(rows); keeps x, the pre-activation and the activation.
  void forward(const void* x, const std::vector<int>& rows, void* y);
  // dy [R, h] -> dx [R, h]; writes w1_grad / w2_grad.
  void backward(const void* dy, void* dx);
  // Only the GEMMs of forward + backward, in the same grouped calls, on the rows of the last
  // forward (for the overhead ratio). Every output, weight gradients included, goes to scratch
  // taken from `scratch_alloc` (so the layer's peak memory does not include it): the layer's
  // state -- activations, weight gradients -- is exactly what the last forward + backward left.
  void gemms_only(TrackingAllocator& scratch_alloc);

  int first() const { return first_; }
  int count() const { return count_; }
  Buffer& w1() { return w1_; }  // [count, h, f]
  Buffer& w2() { return w2_; }  // [count, f, h]
  Buffer& w1_grad() { return w1_grad_; }
  Buffer& w2_grad() { return w2_grad_; }
  double forward_flops() const;  // of the last forward, on the rows it got

 private:
  void run(std::vector<GemmArgs>& problems);
  const char* w1_at(int e) const;
  const char* w2_at(int e) const;
  const MoEConfig& cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  int first_, count_;
  std::size_t es_;  // element size
  Buffer w1_, w2_, w1_grad_, w2_grad_, pointers_;
  Buffer h_, a_, da_;  // [R, f]: pre-activation, activation, its gradient
  Buffer scratch_rows_, scratch_weights_;  // gemms_only outputs
  const void* x_ = nullptr;
  std::vector<int> rows_;
  std::vector<std::size_t> offset_;  // first row of each expert
};

}  // namespace moebench
