// A dispatcher outside moe/, as a new one starts: the one-device layer's, counting the batches it
// dispatches, so that a test sees the layer ran through it. It joins the table by a registration
// (moe/dispatcher_table.h), without a change to moe/.
#pragma once
#include <memory>
#include "moe/dispatcher.h"

namespace moebench::testing_util {

class CountingDispatcher final : public TokenDispatcher {
 public:
  explicit CountingDispatcher(const DispatcherEnv& env) : inner_(make_local_dispatcher(env)) {}
  static int& dispatched() {
    static int n = 0;
    return n;
  }
  std::string name() const override { return "counting_local"; }
  int first_local_expert() const override { return inner_->first_local_expert(); }
  int local_experts() const override { return inner_->local_experts(); }
  int capacity_groups(int tokens) const override { return inner_->capacity_groups(tokens); }
  float aux_grad_scale() const override { return inner_->aux_grad_scale(); }
  bool reads_host_counts() const override { return inner_->reads_host_counts(); }
  std::unique_ptr<DispatchState> dispatch_prepare(const Routing& r, const void* x, const Stream& s) override {
    ++dispatched();
    return inner_->dispatch_prepare(r, x, s);
  }
  void dispatch_exchange(DispatchState& st, const Stream& c) override { inner_->dispatch_exchange(st, c); }
  void dispatch_finish(DispatchState& st, const Stream& s) override { inner_->dispatch_finish(st, s); }
  void combine_prepare(DispatchState& st, const Routing& r, const Buffer& out, void* y, const Stream& s) override {
    inner_->combine_prepare(st, r, out, y, s);
  }
  void combine_exchange(DispatchState& st, const Stream& c) override { inner_->combine_exchange(st, c); }
  void combine_finish(DispatchState& st, const Stream& s) override { inner_->combine_finish(st, s); }
  void combine_backward_prepare(DispatchState& st, const Routing& r, const void* dy, float* dw, const Stream& s) override {
    inner_->combine_backward_prepare(st, r, dy, dw, s);
  }
  void combine_backward_exchange(DispatchState& st, const Stream& c) override { inner_->combine_backward_exchange(st, c); }
  void combine_backward_finish(DispatchState& st, const Stream& s) override { inner_->combine_backward_finish(st, s); }
  void dispatch_backward_prepare(DispatchState& st, const Routing& r, const Buffer& d, void* dx, const Stream& s) override {
    inner_->dispatch_backward_prepare(st, r, d, dx, s);
  }
  void dispatch_backward_exchange(DispatchState& st, const Stream& c) override { inner_->dispatch_backward_exchange(st, c); }
  void dispatch_backward_finish(DispatchState& st, const Stream& s) override { inner_->dispatch_backward_finish(st, s); }
  std::unique_ptr<DispatchState> redispatch_prepare(const DispatchState& st, const void* x, const Stream& s) override {
    return inner_->redispatch_prepare(st, x, s);
  }
  void redispatch_exchange(DispatchState& re, const Stream& c) override { inner_->redispatch_exchange(re, c); }
  void redispatch_finish(DispatchState& re, const Stream& s) override { inner_->redispatch_finish(re, s); }
  void sync_input_gradient(void* dx, std::size_t n, const Stream& s) override { inner_->sync_input_gradient(dx, n, s); }
  void sync_gate_gradient(float* g, std::size_t n, const Stream& s) override { inner_->sync_gate_gradient(g, n, s); }

 private:
  std::unique_ptr<TokenDispatcher> inner_;
};

}  // namespace moebench::testing_util
