#include "moe/dispatcher.h"

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

std::unique_ptr<DispatchState> TokenDispatcher::redispatch(const DispatchState& st, const void* x, const Stream& s) {
  auto re = redispatch_prepare(st, x, s);
  redispatch_exchange(*re, s);
  redispatch_finish(*re, s);
  return re;
}

}  // namespace moebench
