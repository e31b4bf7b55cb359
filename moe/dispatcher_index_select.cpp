// Index selection: a rank holds experts [first, first + count), selects their tokens by index
// (gather by expert), computes them and assigns the weighted results into a zero output.
//  - local: all experts on one rank, `groups` capacity groups; the single-rank reference
//    every distributed dispatcher is tested against (groups = D matches expert parallelism
//    over D ranks).
//  - PPMoE (000 Sec. 3.3, Algorithm 1): the ranks of a tensor-parallel group hold identical
//    tokens and route them identically; each computes its E / TP experts and the outputs are
//    all-reduced over the group. Backward: each rank's input-gradient and gate-gradient shares
//    are all-reduced; the aux-loss gradient is split evenly over the group.
#include "moe/dispatcher.h"
#include "moe/dispatcher_rows.h"

namespace moebench {
namespace {

class IndexSelectDispatcher final : public TokenDispatcher {
 public:
  IndexSelectDispatcher(const DispatcherEnv& env, Communicator* group, int groups)
      : env_(env), group_(group), groups_(groups), ranks_(group ? group->size() : 1),
        count_(env.cfg.experts / ranks_), first_(group ? group->rank() * count_ : 0), rows_(env.dev, env.alloc) {}
  std::string name() const override { return group_ ? "ppmoe" : "local"; }
  int first_local_expert() const override { return first_; }
  int local_experts() const override { return count_; }
  int capacity_groups(int) const override { return groups_; }
  float aux_grad_scale() const override { return 1.f / float(ranks_); }

  void dispatch(const Routing& r, const void* x, Buffer& rows, std::vector<int>& per_expert) override {
    std::vector<std::int32_t> base;
    per_expert = expert_major_bases(r, first_, count_, base);
    rows_.build(r, base);
    std::size_t total = 0;
    for (int n : per_expert) total += std::size_t(n);
    env_.alloc.reserve(rows, std::max<std::size_t>(total, 1) * env_.cfg.hidden * dtype_size(env_.cfg.dtype),
                       MemTag::activations);
    dispatch_rows(exec(), rows_.map(env_.cfg.hidden), x, rows.data(), env_.cfg.dtype);  // index_select
  }
  void combine(const Routing& r, const Buffer& out, void* y) override {
    // index assignment into zeros: tokens of other ranks' experts get 0 here
    combine_rows(exec(), rows_.map(env_.cfg.hidden), out.data(), r.weight.as<float>(), y, env_.cfg.dtype);
    if (group_) all_reduce(y, std::size_t(r.tokens()) * env_.cfg.hidden, env_.cfg.dtype);
  }
  void combine_backward(const Routing& r, const void* dy, const Buffer& out, Buffer& d_out, float* dweight) override {
    env_.alloc.reserve(d_out, out.bytes(), MemTag::temporary);
    combine_rows_backward(exec(), rows_.map(env_.cfg.hidden), dy, out.data(), r.weight.as<float>(), d_out.data(), dweight,
                          env_.cfg.dtype);
  }
  void dispatch_backward(const Routing&, const Buffer& d_rows, void* dx) override {
    dispatch_rows_backward(exec(), rows_.map(env_.cfg.hidden), d_rows.data(), dx, false, env_.cfg.dtype);
  }
  void sync_gradients(void* dx, std::size_t dx_count, float* gate_grad, std::size_t gate_count) override {
    if (!group_) return;
    all_reduce(dx, dx_count, env_.cfg.dtype);
    all_reduce(gate_grad, gate_count, DType::f32);
  }

 private:
  Exec exec() const { return env_.dev.exec(env_.dev.default_stream()); }
  void all_reduce(void* data, std::size_t count, DType t) {
    const Stream& s = env_.dev.default_stream();
    group_->all_reduce(data, data, count, t, ReduceOp::sum, s);
    group_->wait(s);
  }
  DispatcherEnv env_;
  Communicator* group_;
  int groups_, ranks_, count_, first_;
  RowMapper rows_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_local_dispatcher(const DispatcherEnv& env, int groups) {
  return std::make_unique<IndexSelectDispatcher>(env, nullptr, groups);
}

std::unique_ptr<TokenDispatcher> make_ppmoe_dispatcher(const DispatcherEnv& env, Communicator& comm) {
  return std::make_unique<IndexSelectDispatcher>(env, &comm, 1);
}

}  // namespace moebench
