// The one owner of AdamW's state (the update itself is kernels/adam.h's adam_step): for each
// parameter, its two fp32 moments and, for a 16-bit parameter, its fp32 master -- read from
// the weight when the parameter is added, kept from then on, rounded into the weight after
// every update, so updates below the 16-bit spacing still add up; an fp32 weight is its own
// master; a caller may hold a 16-bit parameter's master itself. Each update is one pass
// (kernels/adam.h). All of it comes from the tracking allocator as model states. The
// data-parallel optimizer (gpt/data_parallel.h: per parameter, or over its ZeRO-1 shard),
// MPMoE's layer runner and m6t.cv's training hold their parameters here.
#pragma once
#include <cstddef>
#include <vector>
#include "kernels/adam.h"
#include "kernels/dtype.h"
#include "runtime/allocator.h"
#include "runtime/device.h"

namespace moebench {

class AdamW {
 public:
  // hyper.step is ignored: the steps are counted here, from 1, on the device (a step captured
  // into a graph and replayed counts its own), and on the host for the checks.
  AdamW(AdamStep hyper, Device& dev, TrackingAllocator& alloc);
  // `count` values of `dtype` at `weight` (device memory that outlives this); returns its index.
  std::size_t add(void* weight, std::size_t count, DType dtype, const Stream& s);
  // A 16-bit parameter whose fp32 master the caller holds (and fills before the first update):
  // each update writes `master` and rounds it into `weight` in the same pass.
  std::size_t add(void* weight, std::size_t count, DType dtype, float* master);
  // Counts one more step (the bias corrections'), on `s`; then update() each parameter once.
  void next_step(const Stream& s);
  // Parameter i from `grad` (its count values, in its dtype, or in `grad_dtype`) on `s`.
  void update(std::size_t i, const void* grad, const Stream& s);
  void update(std::size_t i, const void* grad, DType grad_dtype, const Stream& s);
  // Every gradient is multiplied by `scale` in the update (default 1).
  void set_gradient_scale(float scale) { hyper_.grad_scale = scale; }
  // Parameter i's fp32 master: a 16-bit parameter's own, an fp32 parameter's weight.
  const float* master(std::size_t i) const;
  // Bytes of moments held (8 per parameter value) and of fp32 masters (4 per 16-bit value).
  std::size_t moment_bytes() const;
  std::size_t master_bytes() const;

 private:
  struct Parameter {
    void* weight;
    std::size_t count;
    DType dtype;
    float* master;        // the weight itself (fp32), own_master or the caller's
    Buffer own_master;    // 16-bit parameters added without a master
    Buffer m, v;
  };
  std::size_t add_moments(Parameter p, const Stream& s);
  AdamStep hyper_;
  int steps_ = 0;       // next_step() calls, for the checks
  Buffer step_count_;   // the count the updates read (AdamStep::step_count)
  Device& dev_;
  TrackingAllocator& alloc_;
  std::vector<Parameter> params_;
};

}  // namespace moebench
