// moebench_profile (models.profile): this machine's hardware profile for the performance models,
// written by the suite's own micro-benchmarks on the ranks it runs with: a GEMM sweep with every
// rank computing at once (the efficiency curve; the best rate is the peak on the CPU, where no
// datasheet peak is known), a large copy and the GeLU kernel on every rank (memory and
// elementwise bandwidth), all-to-alls among every rank (the link as the collectives see it:
// latency per step from 8 bytes per peer, bandwidth from a large one), and each of the comm
// bench's collectives at sizes 4x apart, timed as the comm bench times them (one call per
// iteration, the slowest rank's): the measured curves the collective model uses on this machine
// (the comm bench's sizes in between are left to check them). Writes
// <out>/models/profile_<name>.csv in the profile format (models/hardware_profile.h) plus the
// spread of each measured value (low, high: the value from the repetitions' slowest and fastest
// times) and provenance columns: models read it like a shipped profile.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>
#include "comm/collective_table.h"
#include "bench/profile_csv.h"
#include "harness/bench.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "runtime/host_copy.h"
#include "models/hardware_profile.h"
#include "moe/init.h"

namespace moebench {
namespace {

class ProfileBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_profile"; }
  std::string description() const override {
    return "This machine's hardware profile for the performance models, from a GEMM sweep, a copy, GeLU and all-to-alls.";
  }
  void add_options(CLI::App& app) override {
    add_text(app, "--name", rec_.name, "NAME", "Profile name: writes <out>/models/profile_<name>.csv (default this_machine)");
    add_path(app, "--link-profile", link_profile_,
             "On one rank: take the link values (intra/inter bandwidth and latency) from this profile (name or CSV)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (rec_.name.empty() || rec_.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
      return "--name: '" + rec_.name + "' is not a profile name; allowed: lower-case letters, digits, '_' and '-'";
    if (ctx.world.size() < 2 && link_profile_.empty())
      return "the link between ranks needs 2 ranks or more to measure; got " + std::to_string(ctx.world.size()) +
             " (launch it with --ranks 2 or more, or give --link-profile for the link values)";
    if (ctx.world.size() >= 2 && !link_profile_.empty())
      return "--link-profile: only on one rank; with " + std::to_string(ctx.world.size()) + " ranks the link is measured";
    if (!link_profile_.empty()) {
      try {
        rec_.link = load_profile_option("--link-profile", link_profile_);
      } catch (const Error& e) {
        return e.what();
      }
    }
    std::vector<int> ms, nks;
    switch (ctx.scale()) {
      case Scale::tiny: ms = {32, 128}; nks = {32, 128}; rec_.copy_bytes = 1 << 20; rec_.big_message = 4 << 20; break;
      case Scale::local: ms = {32, 128, 512, 2048}; nks = {32, 128, 512, 1024}; rec_.copy_bytes = 32 << 20; rec_.big_message = 8 << 20; break;
      case Scale::paper: ms = {256, 1024, 4096, 16384}; nks = {512, 1024, 4096, 8192}; rec_.copy_bytes = 256 << 20; rec_.big_message = 64 << 20; break;
    }
    rec_.shapes.clear();
    for (int m : ms)
      for (int nk : nks) rec_.shapes.push_back({m, nk, nk});
    rec_.curve_sizes.clear();
    const std::uint64_t largest = ctx.scale() == Scale::tiny ? 16 << 10 : ctx.scale() == Scale::local ? 16 << 20 : 256 << 20;
    for (std::uint64_t b = 1 << 10; b <= largest; b *= 4) rec_.curve_sizes.push_back(b);
    std::uint64_t need = std::max(2 * rec_.copy_bytes + 2 * rec_.big_message, 2 * largest);
    for (const Shape& s : rec_.shapes)
      need = std::max<std::uint64_t>(need, std::uint64_t(dtype_size(ctx.dtype())) * (std::uint64_t(s.m) * s.k + std::uint64_t(s.k) * s.n + std::uint64_t(s.m) * s.n));
    return ctx.check_fits(need, "--scale");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/models", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Shape& s : rec_.shapes)
      ctx.add("profile/gemm/" + s.key(), 5, [this, &ctx, s](benchmark::State& st) { gemm_sweep(st, ctx, s); });
    ctx.add("profile/copy", 5, [this, &ctx](benchmark::State& st) { copy(st, ctx); });
    ctx.add("profile/elementwise", 5, [this, &ctx](benchmark::State& st) { elementwise(st, ctx); });
    if (rec_.link) return;  // one rank: the link comes from --link-profile
    for (std::size_t bytes : {small_message(ctx), rec_.big_message})
      ctx.add("profile/exchange/" + std::to_string(bytes), 10,
              [this, &ctx, bytes](benchmark::State& st) { exchange(st, ctx, bytes); });
    for (collectives::Collective c : collectives::all_collectives())
      for (std::uint64_t bytes : rec_.curve_sizes) {
        const collectives::Geometry g = collectives::geometry(c, bytes, ctx.world.size(), ctx.dtype());
        if (g.block == 0) continue;
        ctx.add(curve_key(c, g.size_bytes), 10, [this, &ctx, c, g](benchmark::State& st) { collective(st, ctx, c, g); });
      }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    curve_send_ = Buffer();  // back to the allocator before it goes
    curve_recv_ = Buffer();
    return ctx.rt.rank() == 0 ? write_profile_csv(ctx, rec_, runs) : 0;
  }

 private:
  static constexpr int kCollectiveWarmup = 3;

  void gemm_sweep(benchmark::State& st, BenchContext& ctx, const Shape& s) {
    const DType t = ctx.dtype();
    const std::size_t es = dtype_size(t);
    Buffer a = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(s.m) * s.k, 1, 1, 1.f), t, MemTag::activations);
    Buffer b = device_from_f32(ctx.device, ctx.alloc, normal_vector(std::size_t(s.k) * s.n, 1, 2, 0.02f), t, MemTag::model_states);
    Buffer c = ctx.alloc.allocate(std::size_t(s.m) * s.n * es, MemTag::activations);
    const Stream& str = ctx.device.default_stream();
    const Exec ex = ctx.device.exec(str);
    const GemmArgs g = dense_gemm(false, false, s.m, s.n, s.k, a.data(), b.data(), c.data(), t);
    gemm(ex, g);
    ctx.device.synchronize();
    const int r = repeats(s);
    for (auto _ : st) ctx.time_iteration(st, str, [&] {
      for (int i = 0; i < r; ++i) gemm(ex, g);
    });
  }

  void copy(benchmark::State& st, BenchContext& ctx) {
    Buffer from = ctx.alloc.allocate(rec_.copy_bytes, MemTag::buffers), to = ctx.alloc.allocate(rec_.copy_bytes, MemTag::buffers);
    const Stream& s = ctx.device.default_stream();
    ctx.device.fill_zero(from.data(), rec_.copy_bytes, s);
    ctx.device.synchronize();
    for (auto _ : st) ctx.time_iteration(st, s, [&] {
      for (int i = 0; i < kCopies; ++i) ctx.device.copy(to.data(), from.data(), rec_.copy_bytes, s);
    });
  }

  // The suite's elementwise kernels' rate: GeLU forward over a buffer, every rank at once.
  void elementwise(benchmark::State& st, BenchContext& ctx) {
    const DType t = ctx.dtype();
    const std::size_t n = rec_.copy_bytes / 4;
    Buffer x = ctx.alloc.allocate(n * dtype_size(t), MemTag::buffers), y = ctx.alloc.allocate(n * dtype_size(t), MemTag::buffers);
    const Stream& s = ctx.device.default_stream();
    ctx.device.fill_zero(x.data(), n * dtype_size(t), s);
    ctx.device.synchronize();
    const Exec ex = ctx.device.exec(s);
    for (auto _ : st) ctx.time_iteration(st, s, [&] { gelu_forward(ex, x.data(), y.data(), n, t); });
  }

  // The link as the collectives see it: an all-to-all among every rank, `bytes` per rank's send
  // buffer (bytes / p to each peer), kExchangeRounds times.
  void exchange(benchmark::State& st, BenchContext& ctx, std::size_t bytes) {
    const int p = ctx.world.size();
    if (ctx.skip_if_any(st, p < 2 ? std::optional<std::string>("one rank: no link to measure") : std::nullopt)) return;
    Buffer send = ctx.alloc.allocate(bytes, MemTag::buffers), recv = ctx.alloc.allocate(bytes, MemTag::buffers);
    const Stream& s = ctx.device.default_stream();
    ctx.device.fill_zero(send.data(), bytes, s);
    ctx.device.synchronize();
    for (auto _ : st) ctx.time_iteration(st, s, [&] {
      for (int i = 0; i < kExchangeRounds; ++i)
        ctx.world.all_to_all(send.data(), recv.data(), bytes / 4 / std::size_t(p), DType::i32, s);
      ctx.world.wait(s);
    });
  }

  // One collective of the comm bench at one size, timed as the comm bench times it.
  // Like the comm bench: one pair of buffers of the largest size for every size, its warm-up.
  void collective(benchmark::State& st, BenchContext& ctx, collectives::Collective c, const collectives::Geometry& g) {
    const DType t = ctx.dtype();
    const Stream& s = ctx.device.default_stream();
    if (!curve_send_) {
      curve_send_ = ctx.alloc.allocate(rec_.curve_sizes.back(), MemTag::buffers);
      curve_recv_ = ctx.alloc.allocate(rec_.curve_sizes.back(), MemTag::buffers);
      ctx.device.fill_zero(curve_send_.data(), rec_.curve_sizes.back(), s);
      ctx.device.fill_zero(curve_recv_.data(), rec_.curve_sizes.back(), s);
    }
    const auto& spec = collectives::spec(c);
    for (int i = 0; i < kCollectiveWarmup; ++i) spec.launch(ctx.world, curve_send_.data(), curve_recv_.data(), g, t, s);
    ctx.world.wait(s);
    for (auto _ : st) ctx.time_iteration(st, s, [&] {
      spec.launch(ctx.world, curve_send_.data(), curve_recv_.data(), g, t, s);
      ctx.world.wait(s);
    });
  }

  static std::string curve_key(collectives::Collective c, std::uint64_t size_bytes) {
    return "profile/collective/" + std::string(collectives::collective_name(c)) + "/" + std::to_string(size_bytes);
  }

  static std::size_t small_message(const BenchContext& ctx) { return std::size_t(8) * ctx.world.size(); }

  std::string link_profile_;
  ProfileRecord rec_;
  Buffer curve_send_, curve_recv_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::ProfileBench>(argc, argv); }
