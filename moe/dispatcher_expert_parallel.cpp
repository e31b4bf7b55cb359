// Expert parallelism (DPMoE / FastMoE style): each rank of `comm` holds its own tokens and
// E / D experts. Forward: kept counts are exchanged (all-to-all), the tokens, permuted
// expert-major, go to their experts' ranks (all-to-all-v), arrive as [source][local expert]
// and are regrouped to [local expert][source]; results travel back the same way and are
// combined with the gate weights. Capacity applies per source rank (one group each).
#include "moe/dispatcher.h"
#include "moe/dispatcher_rows.h"

namespace moebench {
namespace {

class ExpertParallelDispatcher final : public TokenDispatcher {
 public:
  ExpertParallelDispatcher(const DispatcherEnv& env, Communicator& comm)
      : env_(env), comm_(comm), D_(comm.size()), L_(env.cfg.experts / comm.size()), first_(comm.rank() * L_),
        rows_(env.dev, env.alloc), counts_upload_(env.dev), perm_upload_(env.dev) {}
  std::string name() const override { return "expert_parallel"; }
  int first_local_expert() const override { return first_; }
  int local_experts() const override { return L_; }
  int capacity_groups(int) const override { return 1; }
  float aux_grad_scale() const override { return 1.f / float(D_); }

  void dispatch(const Routing& r, const void* x, Buffer& rows, std::vector<int>& per_expert) override {
    const int E = env_.cfg.experts, h = env_.cfg.hidden;
    const Stream& s = stream();
    // Send buffer: every kept assignment, expert-major over all E experts (rank blocks are contiguous).
    std::vector<std::int32_t> base;
    const std::vector<int> send_per_expert = expert_major_bases(r, 0, E, base);
    rows_.build(r, base);
    send_rows_.assign(D_, 0);
    for (int e = 0; e < E; ++e) send_rows_[e / L_] += send_per_expert[e];
    const std::size_t send_total = sum(send_rows_);
    reserve(send_, send_total, MemTag::buffers);
    dispatch_rows(exec(), rows_.map(h), x, send_.data(), env_.cfg.dtype);

    // Counts: rank p learns how many rows of each of its experts every source sends.
    env_.alloc.reserve(counts_, std::size_t(2) * E * 4, MemTag::buffers);
    counts_upload_.upload(counts_.data(), send_per_expert.data(), std::size_t(E) * 4, s);
    comm_.all_to_all(counts_.data(), counts_.as<std::int32_t>() + E, std::size_t(L_), DType::i32, s);
    comm_.wait(s);
    recv_counts_.resize(std::size_t(E));  // [source][local expert]
    dev().copy_to_host(recv_counts_.data(), counts_.as<std::int32_t>() + E, std::size_t(E) * 4, s);
    recv_rows_.assign(D_, 0);
    per_expert.assign(L_, 0);
    for (int p = 0; p < D_; ++p)
      for (int l = 0; l < L_; ++l) {
        recv_rows_[p] += recv_counts_[std::size_t(p) * L_ + l];
        per_expert[l] += recv_counts_[std::size_t(p) * L_ + l];
      }
    const std::size_t recv_total = sum(recv_rows_);
    reserve(recv_, recv_total, MemTag::buffers);
    exchange(send_, send_rows_, recv_, recv_rows_);

    // Regroup [source][local expert] -> [local expert][source]; keep both directions of the map,
    // one after the other in one array ([to expert-major][to source-major]), uploaded at once.
    std::vector<std::int32_t> both(2 * recv_total);
    std::int32_t* to_expert_major = both.data();
    std::int32_t* to_source_major = both.data() + recv_total;
    std::vector<std::size_t> expert_start(L_ + 1, 0);
    for (int l = 0; l < L_; ++l) expert_start[l + 1] = expert_start[l] + std::size_t(per_expert[l]);
    std::vector<std::size_t> filled(L_, 0);
    std::size_t i = 0;
    for (int p = 0; p < D_; ++p)
      for (int l = 0; l < L_; ++l)
        for (int j = 0; j < recv_counts_[std::size_t(p) * L_ + l]; ++j, ++i) {
          const std::size_t dest = expert_start[l] + filled[l]++;
          to_expert_major[i] = std::int32_t(dest);
          to_source_major[dest] = std::int32_t(i);
        }
    env_.alloc.reserve(perm_, std::max<std::size_t>(recv_total, 1) * 8, MemTag::buffers);
    perm_upload_.upload(perm_.data(), both.data(), both.size() * 4, s);
    recv_total_ = recv_total;
    reserve(rows, recv_total, MemTag::activations);
    permute(recv_, rows, /*to_expert_major=*/true);
  }

  void combine(const Routing& r, const Buffer& out, void* y) override {
    permute(out, recv_, false);
    reserve(back_, sum(send_rows_), MemTag::activations);  // kept for combine_backward
    exchange(recv_, recv_rows_, back_, send_rows_);
    combine_rows(exec(), rows_.map(env_.cfg.hidden), back_.data(), r.weight.as<float>(), y, env_.cfg.dtype);
  }

  void combine_backward(const Routing& r, const void* dy, const Buffer&, Buffer& d_out, float* dweight) override {
    reserve(send_, sum(send_rows_), MemTag::buffers);
    combine_rows_backward(exec(), rows_.map(env_.cfg.hidden), dy, back_.data(), r.weight.as<float>(), send_.data(),
                          dweight, env_.cfg.dtype);
    exchange(send_, send_rows_, recv_, recv_rows_);
    reserve(d_out, recv_total_, MemTag::temporary);
    permute(recv_, d_out, true);
  }

  void dispatch_backward(const Routing&, const Buffer& d_rows, void* dx) override {
    permute(d_rows, recv_, false);
    exchange(recv_, recv_rows_, send_, send_rows_);
    dispatch_rows_backward(exec(), rows_.map(env_.cfg.hidden), send_.data(), dx, false, env_.cfg.dtype);
  }

  void sync_gradients(void*, std::size_t, float* gate_grad, std::size_t gate_count) override {
    // The gate is replicated over the ranks: its gradient is the sum of every rank's tokens.
    comm_.all_reduce(gate_grad, gate_grad, gate_count, DType::f32, ReduceOp::sum, stream());
    comm_.wait(stream());
  }

 private:
  Device& dev() const { return env_.dev; }
  const Stream& stream() const { return env_.dev.default_stream(); }
  Exec exec() const { return env_.dev.exec(env_.dev.default_stream()); }
  static std::size_t sum(const std::vector<std::size_t>& v) {
    std::size_t s = 0;
    for (std::size_t x : v) s += x;
    return s;
  }
  void reserve(Buffer& b, std::size_t rows, MemTag tag) {
    env_.alloc.reserve(b, std::max<std::size_t>(rows, 1) * env_.cfg.hidden * dtype_size(env_.cfg.dtype), tag);
  }
  // Rows [from_rows[p] for rank p] -> rows [to_rows[p] from rank p], hidden-wide.
  void exchange(const Buffer& from, const std::vector<std::size_t>& from_rows, Buffer& to,
                const std::vector<std::size_t>& to_rows) {
    const std::size_t h = std::size_t(env_.cfg.hidden);
    std::vector<std::size_t> sc(D_), sd(D_), rc(D_), rd(D_);
    std::size_t so = 0, ro = 0;
    for (int p = 0; p < D_; ++p) {
      sc[p] = from_rows[p] * h; sd[p] = so; so += sc[p];
      rc[p] = to_rows[p] * h; rd[p] = ro; ro += rc[p];
    }
    comm_.all_to_all_v(from.data(), sc, sd, to.data(), rc, rd, env_.cfg.dtype, stream());
    comm_.wait(stream());
  }
  void permute(const Buffer& from, Buffer& to, bool to_expert_major) {
    const std::int32_t* map = perm_.as<std::int32_t>() + (to_expert_major ? 0 : recv_total_);
    dispatch_rows(exec(), RowMap{int(recv_total_), 1, env_.cfg.hidden, map}, from.data(), to.data(), env_.cfg.dtype);
  }

  DispatcherEnv env_;
  Communicator& comm_;
  int D_, L_, first_;
  RowMapper rows_;
  std::vector<std::size_t> send_rows_, recv_rows_;
  std::vector<std::int32_t> recv_counts_;
  std::size_t recv_total_ = 0;
  Buffer send_, recv_, back_, counts_, perm_;
  HostStaging counts_upload_, perm_upload_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_expert_parallel_dispatcher(const DispatcherEnv& env, Communicator& comm) {
  return std::make_unique<ExpertParallelDispatcher>(env, comm);
}

}  // namespace moebench
