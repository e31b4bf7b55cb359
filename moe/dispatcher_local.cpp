// All experts on one rank: index-select by expert, compute, weighted scatter back. The
// single-rank reference every distributed dispatcher is tested against; with `groups`
// capacity groups it matches expert parallelism over that many ranks.
#include "moe/dispatcher.h"
#include "moe/dispatcher_rows.h"

namespace moebench {
namespace {

class LocalDispatcher final : public TokenDispatcher {
 public:
  LocalDispatcher(const DispatcherEnv& env, int groups) : env_(env), groups_(groups), rows_(env.dev, env.alloc) {}
  std::string name() const override { return "local"; }
  int first_local_expert() const override { return 0; }
  int local_experts() const override { return env_.cfg.experts; }
  int capacity_groups(int) const override { return groups_; }
  float aux_grad_scale() const override { return 1.f; }

  void dispatch(const Routing& r, const void* x, Buffer& rows, std::vector<int>& per_expert) override {
    std::vector<std::int32_t> base;
    per_expert = expert_major_bases(r, 0, env_.cfg.experts, base);
    rows_.build(r, base);
    std::size_t total = 0;
    for (int n : per_expert) total += std::size_t(n);
    env_.alloc.reserve(rows, std::max<std::size_t>(total, 1) * env_.cfg.hidden * dtype_size(env_.cfg.dtype),
                       MemTag::activations);
    dispatch_rows(exec(), rows_.map(env_.cfg.hidden), x, rows.data(), env_.cfg.dtype);
  }
  void combine(const Routing& r, const Buffer& out, void* y) override {
    combine_rows(exec(), rows_.map(env_.cfg.hidden), out.data(), r.weight.as<float>(), y, env_.cfg.dtype);
  }
  void combine_backward(const Routing& r, const void* dy, const Buffer& out, Buffer& d_out, float* dweight) override {
    env_.alloc.reserve(d_out, out.bytes(), MemTag::temporary);
    combine_rows_backward(exec(), rows_.map(env_.cfg.hidden), dy, out.data(), r.weight.as<float>(), d_out.data(), dweight,
                          env_.cfg.dtype);
  }
  void dispatch_backward(const Routing&, const Buffer& d_rows, void* dx) override {
    dispatch_rows_backward(exec(), rows_.map(env_.cfg.hidden), d_rows.data(), dx, false, env_.cfg.dtype);
  }
  void sync_gradients(void*, std::size_t, float*, std::size_t) override {}

 private:
  Exec exec() const { return env_.dev.exec(env_.dev.default_stream()); }
  DispatcherEnv env_;
  int groups_;
  RowMapper rows_;
};

}  // namespace

std::unique_ptr<TokenDispatcher> make_local_dispatcher(const DispatcherEnv& env, int groups) {
  return std::make_unique<LocalDispatcher>(env, groups);
}

}  // namespace moebench
