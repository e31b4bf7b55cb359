#include "moe/dispatcher.h"
#include "kernels/axpy.h"
#include "runtime/range.h"

namespace moebench {

std::unique_ptr<DispatchState> TokenDispatcher::dispatch(const Routing& r, const void* x, const Stream& s) {
  auto st = dispatch_prepare(r, x, s);
  dispatch_exchange(*st, s);
  dispatch_finish(*st, s);
  return st;
}

void TokenDispatcher::combine(DispatchState& st, const Routing& r, const Buffer& expert_out, void* y, const Stream& s) {
  combine_prepare(st, r, expert_out, y, s);
  combine_exchange(st, s);
  combine_finish(st, s);
}

void TokenDispatcher::combine_backward(DispatchState& st, const Routing& r, const void* dy, float* dweight,
                                       const Stream& s) {
  combine_backward_prepare(st, r, dy, dweight, s);
  combine_backward_exchange(st, s);
  combine_backward_finish(st, s);
}

void TokenDispatcher::dispatch_backward(DispatchState& st, const Routing& r, const Buffer& d_rows, void* dx,
                                        const Stream& s) {
  dispatch_backward_prepare(st, r, d_rows, dx, s);
  dispatch_backward_exchange(st, s);
  dispatch_backward_finish(st, s);
}

void finish_layer_backward(Gate& gate, TokenDispatcher& d, const Routing& r, const void* x, const float* dweight,
                           void* dx, Device& dev, TrackingAllocator& alloc, const Stream& s, Breakdown* b) {
  const MoEConfig& cfg = gate.config();
  const std::size_t gate_count = std::size_t(cfg.hidden) * cfg.experts;
  Buffer gate_grad = alloc.allocate(gate_count * 4, MemTag::temporary, s);
  {
    ScopedRange range("moe.gating.bwd", s, b);
    gate.backward(r, x, dweight, dx, d.aux_grad_scale(), gate_grad.as<float>(), s);
  }
  {
    ScopedRange range("moe.sync.bwd", s, b);
    d.sync_input_gradient(dx, std::size_t(r.tokens()) * cfg.hidden, s);
  }
  ScopedRange range("moe.gate_sync.bwd", s, b);
  d.sync_gate_gradient(gate_grad.as<float>(), gate_count, s);
  axpy(dev.exec(s), gate_count, 1.f, gate_grad.data(), gate.grad().data(), DType::f32);
}

std::unique_ptr<DispatchState> TokenDispatcher::redispatch(const DispatchState& st, const void* x, const Stream& s) {
  auto re = redispatch_prepare(st, x, s);
  redispatch_exchange(*re, s);
  redispatch_finish(*re, s);
  return re;
}

}  // namespace moebench
