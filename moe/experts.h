// The local experts: FFN h -> f -> h with GeLU, no biases (as the M6-T pseudo code), one
// weight pair per expert. Rows arrive expert-major ([rows of expert 0][rows of expert 1]...)
// and all experts run through one grouped GEMM call per step, one GEMM after another, one GEMM
// per expert over side streams running at once (moe/expert_streams.cpp), or -- padded to the
// busiest expert's rows, here or by the dispatcher -- one strided-batched GEMM per step with
// GeLU in the forward's epilogue (moe/experts_padded.cpp), or -- row counts on the device only --
// one segment GEMM per step that reads each expert's rows from device offsets
// (moe/experts_segmented.cpp); cfg.expert_gemm picks. The module keeps weights and their
// gradients only: forward returns the micro-batch's context (its rows, saved activations) that
// backward consumes, so several micro-batches may be in flight. Backward adds into the weight
// gradients; the first backward after zero_grad() writes them instead (beta 0: the
// weight-gradient GEMMs do not read what they overwrite, and zero_grad() clears nothing on the
// device). With cfg.keep_expert_activation off, a context holds the pre-activation h alone
// (MPMoE's T_M) and backward recomputes GeLU(h); a pipelined layer that shares T_M among
// partitions drops h after forward and brings it back before backward (compute_middle again, or
// a copy from the host).
#pragma once
#include <cstdint>
#include <vector>
#include "kernels/pad_rows.h"
#include "moe/config.h"
#include "runtime/allocator.h"
#include "runtime/device.h"

namespace moebench {

// One micro-batch in the experts, from forward to backward.
struct ExpertsContext {
  const void* x = nullptr;           // the rows given to forward [R, h]; alive until backward
  std::vector<int> rows;             // per local expert
  std::vector<std::size_t> offset;   // first row of each expert, and R at the end
  Buffer h, a;                       // pre-activation and activation [R, f]; a only if kept
  int padded = 0;                    // --expert-gemm padded: rows per expert block; h and a are in its layout
  bool given_padded = false;         // ... and x, y, dy, dx too: the dispatcher wrote the blocks
  // --expert-gemm segmented: each expert's first row and the end, [count + 1] on the device; rows
  // and offset stay empty until Experts::read_rows. h and a hold `bound` rows.
  const std::int32_t* device_offset = nullptr;
  std::size_t bound = 0;
  std::size_t total_rows() const { return offset.empty() ? 0 : offset.back(); }
  // Rows the GEMMs compute: the padded blocks and the overflow (kernels/pad_rows.h), or the rows themselves.
  std::size_t computed_rows() const { return padded ? padded_starts(offset, padded).back() : total_rows(); }
};

class Experts {
 public:
  Experts(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, int first_expert, int count);
  // Weights of global expert e come from the stream (seed, e): the same on any layout.
  void init(std::uint64_t seed, const Stream& s);

  // x [R, h] -> y [R, h] with R = sum(rows). With `padded` (--expert-gemm padded only), x and y --
  // and backward's dy and dx -- are in the padded layout of blocks of `padded` rows
  // (kernels/pad_rows.h: an expert too busy for its block in the overflow), padding rows of x and
  // dy zero (DispatchState::padded). Without, the padded route picks its blocks' height
  // (moe/padded_blocks.h) and pads the rows itself.
  ExpertsContext forward(const void* x, const std::vector<int>& rows, void* y, const Stream& s, int padded = 0);
  // --expert-gemm segmented: the rows of expert l are [offset[l], offset[l + 1]) of x and y, offset
  // [count + 1] on the device (alive until backward), x and y holding `bound` rows. Nothing here
  // reads the counts on the host.
  ExpertsContext forward(const void* x, const std::int32_t* device_offset, std::size_t bound, void* y, const Stream& s);
  // The host's copy of a segmented context's rows (waits for the stream): for reports after a step.
  void read_rows(ExpertsContext& c, const Stream& s) const;
  // dy [R, h] -> dx [R, h]; adds the micro-batch's weight gradients into w1_grad / w2_grad.
  // The gradient of h [R, f] is a temporary released at the end, or handed to *keep_grad_h (a
  // layer without memory reuse keeps every partition's until its whole backward is done).
  void backward(const ExpertsContext& c, const void* dy, void* dx, const Stream& s, Buffer* keep_grad_h = nullptr);
  // c.h = c.x W1: forward's first GEMM; MPMoE S3 / S4 run it again in backward to restore T_M.
  void compute_middle(ExpertsContext& c, const Stream& s);
  // The next backward overwrites the weight gradients (they hold stale values until it has run).
  void zero_grad(const Stream& s);
  // Only the GEMMs of forward + backward, in the same grouped calls, on the rows of `c` (for
  // the overhead ratio). Every output, weight gradients included, goes to scratch taken from
  // `scratch_alloc` (so the layer's peak memory does not include it): the layer's state --
  // activations, weight gradients -- is exactly what its forward + backward left.
  void gemms_only(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s);

  int first() const { return first_; }
  int count() const { return count_; }
  Buffer& w1() { return w1_; }  // [count, h, f]
  Buffer& w2() { return w2_; }  // [count, f, h]
  Buffer& w1_grad() { return w1_grad_; }
  Buffer& w2_grad() { return w2_grad_; }
  double forward_flops(const ExpertsContext& c) const;

 private:
  void run(std::vector<GemmArgs>& problems, const Stream& s);
  // The padded route (experts_padded.cpp).
  void forward_padded(ExpertsContext& c, void* y, const Stream& s);
  void compute_middle_padded(ExpertsContext& c, const Stream& s);
  void backward_padded(const ExpertsContext& c, const void* dy, void* dx, float beta, const Stream& s, Buffer* keep_grad_h);
  void gemms_only_padded(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s);
  Buffer pad(const ExpertsContext& c, const void* packed, int width, const Stream& s);  // [E, padded, width]
  // The context's rows in the padded layout: x itself when given padded, else a padded copy in *copy.
  const void* padded_x(const ExpertsContext& c, Buffer* copy, const Stream& s);
  // The segmented route (experts_segmented.cpp).
  void compute_middle_segmented(ExpertsContext& c, const Stream& s);
  void backward_segmented(const ExpertsContext& c, const void* dy, void* dx, float beta, const Stream& s, Buffer* keep_grad_h);
  void gemms_only_segmented(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s);
  const char* w1_at(int e) const;
  const char* w2_at(int e) const;
  const MoEConfig& cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  int first_, count_;
  std::size_t es_;  // element size
  bool overwrite_grads_ = true;  // zero_grad() since the last backward: its GEMMs take beta 0
  Buffer w1_, w2_, w1_grad_, w2_grad_;
  Buffer scratch_rows_, scratch_weights_;  // gemms_only outputs
  Buffer scratch_inputs_;                  // gemms_only_padded's zeroed stand-in inputs
  std::vector<Stream> side_;               // --expert-gemm streams: made at the first step
  void run_on_side_streams(const std::vector<GemmArgs>& problems, const Stream& s);
};

}  // namespace moebench
