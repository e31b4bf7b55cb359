// Data parallelism and ZeRO-1 for a model's parameters, with AdamW as the optimizer:
//   plain DP: the gradients are all-reduced (summed: each rank scaled its loss by the global
//     token count) and every rank steps AdamW on every parameter, holding all of its moments;
//   ZeRO-1: the gradients are reduce-scattered, each rank steps AdamW on its shard only (its
//     moments: 1/D of them) and the updated parameters are all-gathered.
// Mixed precision (000 Sec. 4.1): a parameter may be held in fp16 or bf16 with its gradient; its
// fp32 master lives here -- read from the weights at the first step, kept from then on, rounded
// into the weights after every step -- so updates smaller than the 16-bit spacing still add up.
// fp32 parameters are their own masters. The moments are runtime/adamw.h's.
// Without ZeRO-1 each parameter steps in place in one AdamW pass: with no group it reads the
// gradient in its own dtype; over a group the gradients are widened into one flat fp32 buffer
// and summed there first. ZeRO-1 flattens the parameters too, into one fp32 buffer padded to a
// multiple of the group's size, so that a shard is contiguous and every rank's is the same size.
#pragma once
#include <utility>
#include <vector>
#include "kernels/adam.h"
#include "kernels/dtype.h"
#include "runtime/adamw.h"
#include "runtime/allocator.h"
#include "comm/comm.h"
#include "runtime/device.h"

namespace moebench {

struct TrainedParameter {
  Buffer* weight = nullptr;
  Buffer* grad = nullptr;  // the same size and dtype
  DType dtype = DType::f32;
};

class DataParallelAdam {
 public:
  // `dp`: the data-parallel group (nullptr: none).
  DataParallelAdam(std::vector<TrainedParameter> params, Communicator* dp, bool zero1, AdamStep hyper, Device& dev,
                   TrackingAllocator& alloc);
  // fp32 (parameter, gradient) pairs.
  DataParallelAdam(const std::vector<std::pair<Buffer*, Buffer*>>& params, Communicator* dp, bool zero1, AdamStep hyper,
                   Device& dev, TrackingAllocator& alloc);
  // After every micro-batch's backward: synchronise the gradients and step (collective).
  void step(const Stream& s);
  // The gradients are multiplied by `scale` in the update (default 1): a loss scaled up for fp16
  // -- whose gradients would flush to zero at 1 / tokens each -- is scaled back here.
  void set_gradient_scale(float scale) { gradient_scale_ = scale; }
  // Bytes of AdamW's moments this rank holds (8 per parameter, or per parameter of its shard).
  std::size_t optimizer_state_bytes() const { return adam_.moment_bytes(); }
  // Bytes of fp32 masters kept for 16-bit parameters (4 per such parameter).
  std::size_t master_bytes() const { return 4 * sixteen_bit_count_; }
  std::size_t parameters() const { return count_; }
  // A 16-bit parameter's fp32 master (after the first step); fp32 parameters have none here.
  const float* master_of(const Buffer& weight) const;

 private:
  std::vector<TrainedParameter> params_;
  void step_in_place(const Stream& s);
  void step_zero1(const Stream& s);
  void widen_gradients(const Exec& ex, const Stream& s);  // into flat_g_

  static constexpr std::size_t kNoMaster = ~std::size_t(0);
  std::vector<std::size_t> offset_;         // each parameter's first element in the flat buffers
  std::vector<std::size_t> master_offset_;  // without ZeRO-1: a 16-bit parameter's master in flat_w_
  Communicator* dp_;
  bool zero1_;
  Device& dev_;
  TrackingAllocator& alloc_;
  std::size_t count_ = 0, sixteen_bit_count_ = 0, padded_ = 0, shard_ = 0;
  bool masters_read_ = false;
  float gradient_scale_ = 1.f;
  Buffer flat_w_;  // ZeRO-1: all parameters in fp32; otherwise the 16-bit parameters' masters
  Buffer flat_g_;  // over a group: the gradients in fp32 (none without one)
  AdamW adam_;     // per parameter, or over this rank's shard of flat_w_
};

}  // namespace moebench
