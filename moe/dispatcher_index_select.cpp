// Index selection: a rank holds experts [first, first + count), selects their tokens by index
// (gather by expert), computes them and assigns the weighted results into a zero output.
//  - local: all experts on one rank, `groups` capacity groups; the single-rank reference
//    every distributed dispatcher is tested against (groups = D matches expert parallelism
//    over D ranks). No phase communicates.
//  - PPMoE (000 Sec. 3.3, Algorithm 1): the ranks of a tensor-parallel group hold identical
//    tokens and route them identically; each computes its E / TP experts and the outputs are
//    all-reduced over the group (the combine's exchange). Backward: each rank's input-gradient
//    and gate-gradient shares are all-reduced; the aux-loss gradient is split evenly over the group.
#include "kernels/pad_rows.h"
#include "moe/dispatcher.h"
#include "moe/dispatcher_rows.h"

namespace moebench {
namespace {

struct IndexSelectState final : DispatchState {
  using DispatchState::DispatchState;
  RowMapping mapping;
  const void* expert_out = nullptr;  // the caller's expert outputs (their data: contexts move)
  std::size_t expert_out_bytes = 0;
  void* y = nullptr;
};

class IndexSelectDispatcher final : public TokenDispatcher {
 public:
  IndexSelectDispatcher(const DispatcherEnv& env, Communicator* group, int groups)
      : env_(env), group_(group), groups_(groups), ranks_(group ? group->size() : 1),
        count_(env.cfg.experts / ranks_), first_(group ? group->rank() * count_ : 0), upload_(env.dev) {}
  std::string name() const override { return group_ ? "ppmoe" : "local"; }
  int first_local_expert() const override { return first_; }
  int local_experts() const override { return count_; }
  int capacity_groups(int) const override { return groups_; }
  float aux_grad_scale() const override { return 1.f / float(ranks_); }
  bool reads_host_counts() const override { return !segmented(); }

  std::unique_ptr<DispatchState> dispatch_prepare(const Routing& r, const void* x, const Stream& s) override {
    if (r.expert_slice) throw Error("the " + name() + " dispatcher takes whole routings, not expert slices");
    auto st = std::make_unique<IndexSelectState>(env_.dev.backend());
    std::size_t total = 0;
    if (segmented()) {  // the rows this rank's experts may get: every assignment, or their capacity
      st->mapping = build_row_mapping_on_device(env_.dev, env_.alloc, r, first_, count_, st->expert_offset, s);
      total = std::size_t(r.tokens()) * r.slots();
      if (r.shape.capacity >= 0)
        total = std::min(total, std::size_t(count_) * std::size_t(r.groups()) * std::size_t(r.shape.capacity));
      st->row_bound = total;
    } else {
      std::vector<std::int32_t> base;
      st->rows_per_expert = padded() ? padded_expert_bases(r, first_, count_, env_.cfg.padded_cost, base, &st->padded)
                                     : expert_major_bases(r, first_, count_, base);
      st->mapping = build_row_mapping(env_.dev, env_.alloc, upload_, r, base, s);
      total = row_count(*st);
    }
    st->rows = env_.alloc.allocate(std::max<std::size_t>(total, 1) * hidden_bytes(), MemTag::activations, s);
    zero_padding(*st, st->rows, s);
    move_dispatch(env_.dev, env_.alloc, st->mapping, env_.cfg.hidden, env_.cfg.dtype, x, st->rows.data(), s);  // index_select
    st->end(s);
    return st;
  }
  void dispatch_exchange(DispatchState&, const Stream&) override {}
  void dispatch_finish(DispatchState&, const Stream&) override {}

  std::unique_ptr<DispatchState> redispatch_prepare(const DispatchState& base, const void* x, const Stream& s) override {
    const auto& from = static_cast<const IndexSelectState&>(base);
    auto re = std::make_unique<IndexSelectState>(env_.dev.backend());
    re->rows_per_expert = from.rows_per_expert;
    re->row_bound = from.row_bound;  // the offsets stay the first state's (it outlives this one)
    re->padded = from.padded;
    re->rows = env_.alloc.allocate(std::max<std::size_t>(row_count(*re), 1) * hidden_bytes(), MemTag::activations, s);
    zero_padding(*re, re->rows, s);
    move_dispatch(env_.dev, env_.alloc, from.mapping, env_.cfg.hidden, env_.cfg.dtype, x, re->rows.data(), s);
    re->end(s);
    return re;
  }
  void redispatch_exchange(DispatchState&, const Stream&) override {}
  void redispatch_finish(DispatchState&, const Stream&) override {}

  void combine_prepare(DispatchState& base, const Routing& r, const Buffer& out, void* y, const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.expert_out = out.data();
    st.expert_out_bytes = out.bytes();
    st.y = y;
    // index assignment into zeros: tokens of other ranks' experts get 0 here
    move_combine(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, out.data(), r.weight.as<float>(), y,
                 false, s);
    st.end(s);
  }
  void combine_exchange(DispatchState& base, const Stream& comm) override {
    if (!group_) return;
    auto& st = state(base);
    st.begin(comm);
    group_->all_reduce(st.y, st.y, std::size_t(st.mapping.tokens) * env_.cfg.hidden, env_.cfg.dtype, ReduceOp::sum, comm);
    st.end(comm);
  }
  void combine_finish(DispatchState& base, const Stream& s) override {
    if (!group_) return;
    base.begin(s);
    base.end(s);
  }

  void combine_backward_prepare(DispatchState& base, const Routing& r, const void* dy, float* dweight,
                                const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.d_expert_out = env_.alloc.allocate(st.expert_out_bytes, MemTag::temporary, s);
    zero_padding(st, st.d_expert_out, s);  // zero gradients: the padding adds nothing to dW1, dW2
    move_combine_backward(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, dy, st.expert_out,
                          r.weight.as<float>(), st.d_expert_out.data(), dweight, false, s);
    st.end(s);
  }
  void combine_backward_exchange(DispatchState&, const Stream&) override {}
  void combine_backward_finish(DispatchState&, const Stream&) override {}

  void dispatch_backward_prepare(DispatchState& base, const Routing&, const Buffer& d_rows, void* dx,
                                 const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    move_dispatch_backward(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, d_rows.data(), dx, false,
                           s);
    st.end(s);
  }
  void dispatch_backward_exchange(DispatchState&, const Stream&) override {}
  void dispatch_backward_finish(DispatchState&, const Stream&) override {}

  // In stream order, with no host wait: what reads the sums runs after them on `s`, and a step
  // holds no wait for a graph to refuse (a failure surfaces where the caller waits).
  void sync_input_gradient(void* dx, std::size_t count, const Stream& s) override {
    if (!group_) return;
    group_->all_reduce(dx, dx, count, env_.cfg.dtype, ReduceOp::sum, s);
  }
  void sync_gate_gradient(float* gate_grad, std::size_t count, const Stream& s) override {
    if (!group_) return;
    group_->all_reduce(gate_grad, gate_grad, count, DType::f32, ReduceOp::sum, s);
  }

 private:
  static IndexSelectState& state(DispatchState& s) { return static_cast<IndexSelectState&>(s); }
  bool segmented() const { return env_.cfg.expert_gemm == ExpertGemm::segmented; }
  bool padded() const { return env_.cfg.expert_gemm == ExpertGemm::padded; }
  // Rows of st's layout: its padded blocks and overflow, or its bound (segmented), or the rows themselves.
  std::size_t row_count(const DispatchState& st) const {
    if (padded()) return padded_starts(row_offsets(st.rows_per_expert), st.padded).back();
    std::size_t total = st.row_bound;
    for (int n : st.rows_per_expert) total += std::size_t(n);
    return total;
  }
  // The padding rows of `rows` in st's padded layout are zeroed (the map writes the others).
  void zero_padding(const DispatchState& st, Buffer& rows, const Stream& s) {
    if (!padded()) return;
    zero_padding_rows(env_.dev.exec(s), RowPadding{row_offsets(st.rows_per_expert), st.padded, env_.cfg.hidden, env_.cfg.dtype}, rows.data());
  }
  std::size_t hidden_bytes() const { return std::size_t(env_.cfg.hidden) * dtype_size(env_.cfg.dtype); }

  DispatcherEnv env_;
  Communicator* group_;
  int groups_, ranks_, count_, first_;
  HostStaging upload_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_local_dispatcher(const DispatcherEnv& env, int groups) {
  return std::make_unique<IndexSelectDispatcher>(env, nullptr, groups);
}

std::unique_ptr<TokenDispatcher> make_ppmoe_dispatcher(const DispatcherEnv& env, Communicator& comm) {
  return std::make_unique<IndexSelectDispatcher>(env, &comm, 1);
}

}  // namespace moebench
