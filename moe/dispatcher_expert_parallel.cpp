// Expert parallelism (DPMoE / FastMoE style): each rank of `comm` holds its own tokens and
// E / D experts. Dispatch: prepare permutes the kept assignments expert-major into the send
// buffer; exchange swaps the counts (all-to-all, which the host waits for: it sizes the rest)
// and the rows (all-to-all-v); finish regroups what arrived as [source][local expert] into
// [local expert][source]. Combine, and both backward directions, mirror it; the combine
// direction runs over `combine_comm`. Capacity applies per source rank (one group each).
// Communication buffers live for one exchange: each is taken where it is filled and given back
// once the phase that reads it is queued (the pool reuses it in stream order), so between
// forward and backward a micro-batch holds its activations -- the expert-major rows, the
// returned outputs -- and row maps only. Buffers that two streams touch are recorded on both.
#include "moe/dispatcher.h"
#include "moe/dispatcher_rows.h"

namespace moebench {
namespace {

struct ExpertParallelState final : DispatchState {
  using DispatchState::DispatchState;
  RowMapping mapping;
  std::vector<int> send_per_expert;             // [E]: this rank's rows for every expert
  std::vector<std::size_t> send_rows, recv_rows;  // per peer
  std::vector<std::int32_t> recv_counts;        // [source][local expert]
  std::size_t recv_total = 0;
  bool slice = false;                           // an expert slice of the routing: add, do not overwrite
  Buffer send, recv, back, counts, perm;
  const ExpertParallelState* maps = this;       // whose row maps it uses (a redispatch: the original's)
  const float* weight = nullptr;  // the routing's combine weights [T, S]
  void* y = nullptr;
  void* dx = nullptr;
};

std::size_t sum(const std::vector<std::size_t>& v) {
  std::size_t s = 0;
  for (std::size_t x : v) s += x;
  return s;
}

class ExpertParallelDispatcher final : public TokenDispatcher {
 public:
  ExpertParallelDispatcher(const DispatcherEnv& env, Communicator& comm, Communicator& combine_comm)
      : env_(env), comm_(comm), combine_comm_(combine_comm), D_(comm.size()), L_(env.cfg.experts / comm.size()),
        first_(comm.rank() * L_), upload_(env.dev) {
    if (env.cfg.expert_gemm == ExpertGemm::segmented)
      throw Error("the expert_parallel dispatcher sizes its all-to-all from row counts on the host; --expert-gemm "
                  "segmented keeps them on the device (allowed with the local and ppmoe dispatchers)");
  }
  std::string name() const override { return "expert_parallel"; }
  int first_local_expert() const override { return first_; }
  int local_experts() const override { return L_; }
  int capacity_groups(int) const override { return 1; }
  float aux_grad_scale() const override { return 1.f / float(D_); }

  std::unique_ptr<DispatchState> dispatch_prepare(const Routing& r, const void* x, const Stream& s) override {
    const int E = env_.cfg.experts;
    auto st = std::make_unique<ExpertParallelState>(env_.dev.backend());
    st->slice = r.expert_slice;
    // Send buffer: every kept assignment, expert-major over all E experts (rank blocks are contiguous).
    std::vector<std::int32_t> base;
    st->send_per_expert = expert_major_bases(r, 0, E, base);
    st->mapping = build_row_mapping(env_.dev, env_.alloc, upload_, r, base, s);
    st->send_rows.assign(D_, 0);
    for (int e = 0; e < E; ++e) st->send_rows[e / L_] += st->send_per_expert[e];
    st->send = rows_buffer(sum(st->send_rows), MemTag::buffers, s);
    move_dispatch(env_.dev, env_.alloc, st->mapping, env_.cfg.hidden, env_.cfg.dtype, x, st->send.data(), s);
    st->counts = env_.alloc.allocate(std::size_t(2) * E * 4, MemTag::buffers, s);
    upload_.upload(st->counts.data(), st->send_per_expert.data(), std::size_t(E) * 4, s);
    st->end(s);
    return st;
  }

  void dispatch_exchange(DispatchState& base, const Stream& c) override {
    auto& st = state(base);
    const int E = env_.cfg.experts;
    st.begin(c);
    st.send.record_stream(c);
    st.counts.record_stream(c);
    // Counts: rank p learns how many rows of each of its experts every source sends.
    comm_.all_to_all(st.counts.data(), st.counts.as<std::int32_t>() + E, std::size_t(L_), DType::i32, c);
    st.recv_counts.resize(std::size_t(E));  // [source][local expert]
    env_.dev.copy_to_host(st.recv_counts.data(), st.counts.as<std::int32_t>() + E, std::size_t(E) * 4, c);
    st.counts.release();
    st.recv_rows.assign(D_, 0);
    st.rows_per_expert.assign(L_, 0);
    for (int p = 0; p < D_; ++p)
      for (int l = 0; l < L_; ++l) {
        st.recv_rows[p] += st.recv_counts[std::size_t(p) * L_ + l];
        st.rows_per_expert[l] += st.recv_counts[std::size_t(p) * L_ + l];
      }
    st.recv_total = sum(st.recv_rows);
    st.recv = rows_buffer(st.recv_total, MemTag::buffers, c);
    exchange(comm_, st.send, st.send_rows, st.recv, st.recv_rows, c);
    st.send.release();
    st.end(c);
  }

  void dispatch_finish(DispatchState& base, const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.recv.record_stream(s);
    // Regroup [source][local expert] -> [local expert][source]; both directions of the map, one
    // after the other in one array ([to expert-major][to source-major]), uploaded at once.
    const std::size_t n = st.recv_total;
    std::vector<std::int32_t> both(2 * n);
    std::vector<std::size_t> expert_start(L_ + 1, 0), filled(L_, 0);
    for (int l = 0; l < L_; ++l) expert_start[l + 1] = expert_start[l] + std::size_t(st.rows_per_expert[l]);
    std::size_t i = 0;
    for (int p = 0; p < D_; ++p)
      for (int l = 0; l < L_; ++l)
        for (int j = 0; j < st.recv_counts[std::size_t(p) * L_ + l]; ++j, ++i) {
          const std::size_t dest = expert_start[l] + filled[l]++;
          both[i] = std::int32_t(dest);
          both[n + dest] = std::int32_t(i);
        }
    st.perm = env_.alloc.allocate(std::max<std::size_t>(n, 1) * 8, MemTag::buffers, s);
    upload_.upload(st.perm.data(), both.data(), both.size() * 4, s);
    st.rows = rows_buffer(n, MemTag::activations, s);
    permute(st, st.recv, st.rows, /*to_expert_major=*/true, s);
    st.recv.release();
    st.end(s);
  }

  std::unique_ptr<DispatchState> redispatch_prepare(const DispatchState& base, const void* x, const Stream& s) override {
    const auto& from = static_cast<const ExpertParallelState&>(base);
    auto re = std::make_unique<ExpertParallelState>(env_.dev.backend());
    re->maps = &from;
    re->send_rows = from.send_rows;
    re->recv_rows = from.recv_rows;
    re->recv_total = from.recv_total;
    re->rows_per_expert = from.rows_per_expert;
    re->send = rows_buffer(sum(re->send_rows), MemTag::buffers, s);
    move_dispatch(env_.dev, env_.alloc, from.mapping, env_.cfg.hidden, env_.cfg.dtype, x, re->send.data(), s);
    re->end(s);
    return re;
  }

  void redispatch_exchange(DispatchState& base, const Stream& c) override {
    auto& re = state(base);
    exchange_phase(re, comm_, re.send, re.send_rows, re.recv, re.recv_rows, MemTag::buffers, c);
  }

  void redispatch_finish(DispatchState& base, const Stream& s) override {
    auto& re = state(base);
    permute_phase(re, re.recv, re.rows, MemTag::activations, s);
  }

  void combine_prepare(DispatchState& base, const Routing& r, const Buffer& out, void* y, const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.y = y;
    st.weight = r.weight.as<float>();
    st.recv = rows_buffer(st.recv_total, MemTag::buffers, s);
    permute(st, out, st.recv, false, s);
    st.end(s);
  }

  void combine_exchange(DispatchState& base, const Stream& c) override {
    auto& st = state(base);  // the returned rows are kept for combine_backward
    exchange_phase(st, combine_comm_, st.recv, st.recv_rows, st.back, st.send_rows, MemTag::activations, c);
  }

  void combine_finish(DispatchState& base, const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.back.record_stream(s);
    move_combine(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, st.back.data(), st.weight, st.y,
                 st.slice, s);
    st.end(s);
  }

  void combine_backward_prepare(DispatchState& base, const Routing& r, const void* dy, float* dweight,
                                const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.back.record_stream(s);
    st.send = rows_buffer(sum(st.send_rows), MemTag::buffers, s);
    move_combine_backward(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, dy, st.back.data(),
                          r.weight.as<float>(), st.send.data(), dweight, st.slice, s);
    st.back.release();
    st.end(s);
  }

  void combine_backward_exchange(DispatchState& base, const Stream& c) override {
    auto& st = state(base);
    exchange_phase(st, combine_comm_, st.send, st.send_rows, st.recv, st.recv_rows, MemTag::buffers, c);
  }

  void combine_backward_finish(DispatchState& base, const Stream& s) override {
    auto& st = state(base);
    permute_phase(st, st.recv, st.d_expert_out, MemTag::temporary, s);
  }

  void dispatch_backward_prepare(DispatchState& base, const Routing&, const Buffer& d_rows, void* dx,
                                 const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.dx = dx;
    st.recv = rows_buffer(st.recv_total, MemTag::buffers, s);
    permute(st, d_rows, st.recv, false, s);
    st.perm.release();
    st.end(s);
  }

  void dispatch_backward_exchange(DispatchState& base, const Stream& c) override {
    auto& st = state(base);
    exchange_phase(st, comm_, st.recv, st.recv_rows, st.send, st.send_rows, MemTag::buffers, c);
  }

  void dispatch_backward_finish(DispatchState& base, const Stream& s) override {
    auto& st = state(base);
    st.begin(s);
    st.send.record_stream(s);
    move_dispatch_backward(env_.dev, env_.alloc, st.mapping, env_.cfg.hidden, env_.cfg.dtype, st.send.data(), st.dx,
                           st.slice, s);
    st.send.release();
    st.end(s);
  }

  void sync_input_gradient(void*, std::size_t, const Stream&) override {}  // each rank has its own tokens
  void sync_gate_gradient(float* gate_grad, std::size_t count, const Stream& s) override {
    // The gate is replicated over the ranks: its gradient is the sum of every rank's tokens.
    comm_.all_reduce(gate_grad, gate_grad, count, DType::f32, ReduceOp::sum, s);
    comm_.wait(s);
  }

 private:
  static ExpertParallelState& state(DispatchState& s) { return static_cast<ExpertParallelState&>(s); }
  Exec exec(const Stream& s) const { return env_.dev.exec(s); }
  Buffer rows_buffer(std::size_t rows, MemTag tag, const Stream& s) {
    return env_.alloc.allocate(std::max<std::size_t>(rows, 1) * env_.cfg.hidden * dtype_size(env_.cfg.dtype), tag, s);
  }
  // Rows [from_rows[p] for rank p] -> rows [to_rows[p] from rank p], hidden-wide, over `comm` on `c`.
  void exchange(Communicator& comm, const Buffer& from, const std::vector<std::size_t>& from_rows, Buffer& to,
                const std::vector<std::size_t>& to_rows, const Stream& c) {
    const std::size_t h = std::size_t(env_.cfg.hidden);
    std::vector<std::size_t> sc(D_), sd(D_), rc(D_), rd(D_);
    std::size_t so = 0, ro = 0;
    for (int p = 0; p < D_; ++p) {
      sc[p] = from_rows[p] * h; sd[p] = so; so += sc[p];
      rc[p] = to_rows[p] * h; rd[p] = ro; ro += rc[p];
    }
    comm.all_to_all_v(from.data(), sc, sd, to.data(), rc, rd, env_.cfg.dtype, c);
  }
  // A phase that only moves rows over `comm`: `to` is taken for them, `from` given back.
  void exchange_phase(ExpertParallelState& st, Communicator& comm, Buffer& from, const std::vector<std::size_t>& from_rows,
                      Buffer& to, const std::vector<std::size_t>& to_rows, MemTag to_tag, const Stream& c) {
    st.begin(c);
    from.record_stream(c);
    to = rows_buffer(sum(to_rows), to_tag, c);
    exchange(comm, from, from_rows, to, to_rows, c);
    from.release();
    st.end(c);
  }
  // A phase that only regroups arrived rows [source][local expert] expert-major into `to`.
  void permute_phase(ExpertParallelState& st, Buffer& from, Buffer& to, MemTag to_tag, const Stream& s) {
    st.begin(s);
    from.record_stream(s);
    to = rows_buffer(st.recv_total, to_tag, s);
    permute(st, from, to, /*to_expert_major=*/true, s);
    from.release();
    st.end(s);
  }
  void permute(ExpertParallelState& st, const Buffer& from, Buffer& to, bool to_expert_major, const Stream& s) {
    const std::int32_t* map = st.maps->perm.as<std::int32_t>() + (to_expert_major ? 0 : st.recv_total);
    dispatch_rows(exec(s), RowMap{int(st.recv_total), 1, env_.cfg.hidden, map}, from.data(), to.data(), env_.cfg.dtype);
  }

  DispatcherEnv env_;
  Communicator& comm_;
  Communicator& combine_comm_;
  int D_, L_, first_;
  HostStaging upload_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_expert_parallel_dispatcher(const DispatcherEnv& env, Communicator& comm,
                                                                 Communicator* combine_comm) {
  if (combine_comm && combine_comm->size() != comm.size())
    throw Error("the combine communicator has " + std::to_string(combine_comm->size()) + " ranks, the dispatch one " +
                std::to_string(comm.size()) + ": they must be the same ranks");
  return std::make_unique<ExpertParallelDispatcher>(env, comm, combine_comm ? *combine_comm : comm);
}

}  // namespace moebench
