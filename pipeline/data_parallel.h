// Data parallelism and ZeRO-1 for a model's fp32 parameters, with AdamW as the optimizer:
//   plain DP: the gradients are all-reduced (summed: each rank scaled its loss by the global
//     token count) and every rank steps AdamW on every parameter, holding all of its moments;
//   ZeRO-1: the gradients are reduce-scattered, each rank steps AdamW on its shard only (its
//     moments: 1/D of them) and the updated parameters are all-gathered.
// The parameters are flattened into one buffer padded to a multiple of the group's size, so a
// shard is contiguous and every rank's is the same size.
#pragma once
#include <utility>
#include <vector>
#include "kernels/adam.h"
#include "runtime/allocator.h"
#include "runtime/comm.h"
#include "runtime/device.h"

namespace moebench {

class DataParallelAdam {
 public:
  // `params`: (parameter, gradient) pairs, fp32. `dp`: the data-parallel group (nullptr: none).
  DataParallelAdam(std::vector<std::pair<Buffer*, Buffer*>> params, Communicator* dp, bool zero1, AdamStep hyper,
                   Device& dev, TrackingAllocator& alloc);
  // After every micro-batch's backward: synchronise the gradients and step (collective).
  void step(const Stream& s);
  // Bytes of AdamW's moments this rank holds (8 per parameter, or per parameter of its shard).
  std::size_t optimizer_state_bytes() const { return m_.bytes() + v_.bytes(); }
  std::size_t parameters() const { return count_; }

 private:
  std::vector<std::pair<Buffer*, Buffer*>> params_;
  Communicator* dp_;
  bool zero1_;
  AdamStep hyper_;
  Device& dev_;
  TrackingAllocator& alloc_;
  std::size_t count_ = 0, padded_ = 0, shard_ = 0;
  Buffer flat_w_, flat_g_, m_, v_;
};

}  // namespace moebench
