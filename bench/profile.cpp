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
#include "harness/comm_check.h"
#include "harness/bench.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"
#include "runtime/host_copy.h"
#include "models/hardware_profile.h"
#include "moe/init.h"

namespace moebench {
namespace {

struct Shape {
  int m, n, k;
  double flops() const { return gemm_flops(m, n, k); }
  std::string key() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
};

class ProfileBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_profile"; }
  std::string description() const override {
    return "This machine's hardware profile for the performance models, from a GEMM sweep, a copy, GeLU and all-to-alls.";
  }
  void add_options(CLI::App& app) override {
    add_text(app, "--name", name_, "NAME", "Profile name: writes <out>/models/profile_<name>.csv (default this_machine)");
    add_path(app, "--link-profile", link_profile_,
             "On one rank: take the link values (intra/inter bandwidth and latency) from this profile (name or CSV)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (name_.empty() || name_.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_-") != std::string::npos)
      return "--name: '" + name_ + "' is not a profile name; allowed: lower-case letters, digits, '_' and '-'";
    if (ctx.world.size() < 2 && link_profile_.empty())
      return "the link between ranks needs 2 ranks or more to measure; got " + std::to_string(ctx.world.size()) +
             " (launch it with --ranks 2 or more, or give --link-profile for the link values)";
    if (ctx.world.size() >= 2 && !link_profile_.empty())
      return "--link-profile: only on one rank; with " + std::to_string(ctx.world.size()) + " ranks the link is measured";
    if (!link_profile_.empty()) {
      try {
        link_ = load_profile_option("--link-profile", link_profile_);
      } catch (const Error& e) {
        return e.what();
      }
    }
    std::vector<int> ms, nks;
    switch (ctx.scale()) {
      case Scale::tiny: ms = {32, 128}; nks = {32, 128}; copy_bytes_ = 1 << 20; big_message_ = 4 << 20; break;
      case Scale::local: ms = {32, 128, 512, 2048}; nks = {32, 128, 512, 1024}; copy_bytes_ = 32 << 20; big_message_ = 8 << 20; break;
      case Scale::paper: ms = {256, 1024, 4096, 16384}; nks = {512, 1024, 4096, 8192}; copy_bytes_ = 256 << 20; big_message_ = 64 << 20; break;
    }
    shapes_.clear();
    for (int m : ms)
      for (int nk : nks) shapes_.push_back({m, nk, nk});
    curve_sizes_.clear();
    const std::uint64_t largest = ctx.scale() == Scale::tiny ? 16 << 10 : ctx.scale() == Scale::local ? 16 << 20 : 256 << 20;
    for (std::uint64_t b = 1 << 10; b <= largest; b *= 4) curve_sizes_.push_back(b);
    std::uint64_t need = std::max(2 * copy_bytes_ + 2 * big_message_, 2 * largest);
    for (const Shape& s : shapes_)
      need = std::max<std::uint64_t>(need, std::uint64_t(dtype_size(ctx.dtype())) * (std::uint64_t(s.m) * s.k + std::uint64_t(s.k) * s.n + std::uint64_t(s.m) * s.n));
    return ctx.check_fits(need, "--scale");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/models", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Shape& s : shapes_)
      ctx.add("profile/gemm/" + s.key(), 5, [this, &ctx, s](benchmark::State& st) { gemm_sweep(st, ctx, s); });
    ctx.add("profile/copy", 5, [this, &ctx](benchmark::State& st) { copy(st, ctx); });
    ctx.add("profile/elementwise", 5, [this, &ctx](benchmark::State& st) { elementwise(st, ctx); });
    if (link_) return;  // one rank: the link comes from --link-profile
    for (std::size_t bytes : {small_message(ctx), big_message_})
      ctx.add("profile/exchange/" + std::to_string(bytes), 10,
              [this, &ctx, bytes](benchmark::State& st) { exchange(st, ctx, bytes); });
    for (comm_bench::Collective c : comm_bench::all_collectives())
      for (std::uint64_t bytes : curve_sizes_) {
        const comm_bench::Geometry g = comm_bench::geometry(c, bytes, ctx.world.size(), ctx.dtype());
        if (g.block == 0) continue;
        ctx.add(curve_key(c, g.size_bytes), 10, [this, &ctx, c, g](benchmark::State& st) { collective(st, ctx, c, g); });
      }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    curve_send_ = Buffer();  // back to the allocator before it goes
    curve_recv_ = Buffer();
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, Spread> spread;
    for (const auto& r : runs)
      if (!r.error) spread[r.name] = r.time_ms();
    const std::string elementwise_key = "profile/elementwise", copy_key = "profile/copy",
                      small_key = "profile/exchange/" + std::to_string(small_message(ctx)),
                      big_key = "profile/exchange/" + std::to_string(big_message_);
    bool any_gemm = false;
    for (const Shape& s : shapes_) any_gemm |= spread.count("profile/gemm/" + s.key()) > 0;
    if (!any_gemm || !spread.count(copy_key) || !spread.count(elementwise_key) ||
        (!link_ && (!spread.count(small_key) || !spread.count(big_key)))) {
      std::fprintf(stderr, "moebench_profile: error: a measurement failed; no profile written\n");
      return 1;
    }
    const bool cpu = ctx.backend() == Backend::cpu;
    const bool half = ctx.dtype() != DType::f32;
    const int ranks = ctx.world.size();
    // The pairwise all-to-all's (p - 1) steps: t = (p - 1) (alpha + n / (p B)).
    const double steps = double(ranks - 1);
    // Every measured value from one time per measurement: the median (the profile's value), and
    // the fastest and slowest repetitions' (its spread; the link's bandwidth, a difference of two
    // times, takes the other end of the small exchange's so the range holds the median's value).
    struct Values {
      std::map<double, double> rate;  // FLOP/s per GEMM size (equal sizes from different shapes: their mean)
      double peak = 0, copy_bw = 0, latency = 0, elementwise_bw = 0, link_bw = 0;
    };
    auto values = [&](double Spread::*pick, double Spread::*other_end) {
      Values v;
      std::map<double, std::vector<double>> rates;
      for (const Shape& s : shapes_) {
        const auto it = spread.find("profile/gemm/" + s.key());
        if (it != spread.end()) rates[s.flops()].push_back(s.flops() / (it->second.*pick / repeats(s) * 1e-3));
      }
      for (const auto& [f, r] : rates) {
        double mean = 0;
        for (double x : r) mean += x;
        v.peak = std::max(v.peak, v.rate[f] = mean / double(r.size()));
      }
      const auto ms = [&](const std::string& key) { return spread.at(key).*pick; };
      v.copy_bw = 2.0 * double(copy_bytes_) / (ms(copy_key) / kCopies * 1e-3);  // read + write
      v.elementwise_bw = 2.0 * double(copy_bytes_ / 4 * dtype_size(ctx.dtype())) / (ms(elementwise_key) * 1e-3);
      v.latency = link_ ? link_->intra_latency : ms(small_key) / kExchangeRounds * 1e-3 / steps;
      // At the fast end the big exchange's fastest repetition may not outlast the small one's
      // slowest (a noisy machine, a tiny message): the bandwidth is then unbounded above.
      if (link_) {  // one rank ran no exchange
        v.link_bw = link_->intra_bw;
        return v;
      }
      const double big_less_small = ms(big_key) - spread.at(small_key).*other_end;
      v.link_bw = big_less_small > 0 ? steps * double(big_message_) / ranks / (big_less_small / kExchangeRounds * 1e-3)
                                     : std::numeric_limits<double>::infinity();
      return v;
    };
    const Values mid = values(&Spread::median, &Spread::median), fast = values(&Spread::min, &Spread::max),
                 slow = values(&Spread::max, &Spread::min);
    if (!std::isfinite(mid.link_bw))
      throw Error("moebench_profile: the link's bandwidth is not measurable in this run: the " +
                  std::to_string(big_message_ >> 20) + " MiB exchange's median time did not exceed the small one's "
                  "(a loaded machine?); run it again");
    const double peak = mid.peak;
    std::size_t free_bytes = 0, total_bytes = 0;
    ctx.device.memory(&free_bytes, &total_bytes);
    const double memory = cpu ? double(total_bytes) / ranks : double(total_bytes);
    const std::string here = "measured by moebench_profile on " + ctx.provenance.device + " (" + std::to_string(ranks) +
                             " ranks, " + ctx.provenance.link + ")";
    CsvTable t({"field", "at", "value", "unit", "low", "high", "source"});
    auto put = [&](const std::string& f, double v, const std::string& unit, const std::string& src) {
      t.add_row({f, "", fmt(v, 6), unit, "", "", src});
    };
    // A value from this run's measurements, with its range over the fastest and slowest repetitions.
    // An end may be unbounded (the link's fast end, above): "inf", which no reader takes for a value.
    auto put_measured = [&](const std::string& f, double Values::*field, double scale, const std::string& unit,
                            const std::string& src) {
      const double a = fast.*field * scale, b = slow.*field * scale;
      auto end = [](double v) { return std::isinf(v) ? std::string("inf") : fmt(v, 6); };
      t.add_row({f, "", fmt(mid.*field * scale, 6), unit, end(std::min(a, b)), end(std::max(a, b)), src});
    };
    t.add_row({"name", "", name_ + ": " + ctx.provenance.device + ", " + std::to_string(ranks) + " ranks (" +
                                backend_name(ctx.backend()) + " backend)",
               "", "", "", here});
    const std::string from_link = link_ ? "not measured (one rank): from profile " + link_->path : "";
    put("gpus_per_node", link_ ? link_->gpus_per_node : ranks, "count",
        link_ ? from_link : "the ranks of this run, one node");
    const std::string peak_src = here + ": the sweep's best GEMM rate per rank, every rank computing";
    put_measured(half ? "peak_fp16" : "peak_fp32", &Values::peak, 1e-12, "TFLOP/s", peak_src);
    put(half ? "peak_fp32" : "peak_fp16", peak / 1e12, "TFLOP/s",
        cpu ? "the CPU backend computes fp32 only: the fp32 peak" : "not measured in this run: the measured dtype's peak");
    put("memory", memory / 1e9, "GB", cpu ? "this machine's memory / ranks" : "the device's memory");
    put_measured("memory_bw", &Values::copy_bw, 1e-9, "GB/s",
                 here + ": a copy of " + std::to_string(copy_bytes_ >> 20) + " MiB on every rank, read + write");
    put_measured("elementwise_bw", &Values::elementwise_bw, 1e-9, "GB/s",
                 here + ": GeLU forward over " + std::to_string(copy_bytes_ >> 20) + " MiB on every rank, read + write");
    if (link_) {
      put("intra_bw", link_->intra_bw / 1e9, "GB/s", from_link);
      put("intra_latency", link_->intra_latency * 1e6, "us", from_link);
      put("inter_bw", link_->inter_bw / 1e9, "GB/s", from_link);
      put("inter_latency", link_->inter_latency * 1e6, "us", from_link);
    } else {
      put_measured("intra_bw", &Values::link_bw, 1e-9, "GB/s",
                   here + ": an all-to-all of " + std::to_string(big_message_ >> 20) +
                       " MiB per rank, less the small one's time, as (p - 1) n / (p B)");
      put_measured("intra_latency", &Values::latency, 1e6, "us", here + ": an all-to-all of 8 bytes per peer, over its p - 1 steps");
      put_measured("inter_bw", &Values::link_bw, 1e-9, "GB/s", "one node: no link between nodes was measured; the intra-node value");
      put_measured("inter_latency", &Values::latency, 1e6, "us", "one node: no link between nodes was measured; the intra-node value");
    }
    put_measured("pcie_bw", &Values::copy_bw, 0.5e-9, "GB/s",
                 cpu ? "host and device are the same memory: the copy's rate" : here + ": the device copy's rate (no host transfer measured)");
    for (const auto& [f, r] : mid.rate) {
      const double a = fast.rate.at(f) / peak, b = slow.rate.at(f) / peak;
      t.add_row({"gemm_efficiency", fmt(f / 1e9, 6), fmt(r / peak, 4), "fraction", fmt(std::min(a, b), 4),
                 fmt(std::max(a, b), 4),
                 here + ": [m, k] x [k, n] " + std::string(dtype_name(ctx.dtype())) + " GEMMs, rate over the best (median)"});
    }
    for (comm_bench::Collective c : comm_bench::all_collectives())
      for (std::uint64_t bytes : curve_sizes_) {
        const comm_bench::Geometry g = comm_bench::geometry(c, bytes, ranks, ctx.dtype());
        const auto it = spread.find(curve_key(c, g.size_bytes));
        if (g.block == 0 || it == spread.end()) continue;
        t.add_row({std::string(comm_bench::collective_name(c)) + "_time", std::to_string(g.size_bytes),
                   fmt(it->second.median * 1e3, 6), "us", fmt(it->second.min * 1e3, 6), fmt(it->second.max * 1e3, 6),
                   here + ": one call per iteration, the slowest rank's time, as the comm bench times it"});
      }
    const std::string path = ctx.opts.out_dir + "/models/profile_" + name_ + ".csv";
    t.write(path, ctx.provenance);
    std::printf("profile: peak %.3g GFLOP/s per rank, memory %.3g GB/s, link %.3g GB/s and %.3g us; wrote %s\n",
                peak / 1e9, mid.copy_bw / 1e9, mid.link_bw / 1e9, mid.latency * 1e6, path.c_str());
    return 0;
  }

 private:
  static constexpr int kCopies = 4, kExchangeRounds = 20, kCollectiveWarmup = 3;
  // GEMMs per timed iteration: about 1.5 GFLOP, tens of ms on a core -- longer than the OS's
  // time slice, so ranks sharing cores share them during the measurement as during a run.
  static int repeats(const Shape& s) { return std::max(1, int(1.5e9 / s.flops())); }

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
    Buffer from = ctx.alloc.allocate(copy_bytes_, MemTag::buffers), to = ctx.alloc.allocate(copy_bytes_, MemTag::buffers);
    const Stream& s = ctx.device.default_stream();
    ctx.device.fill_zero(from.data(), copy_bytes_, s);
    ctx.device.synchronize();
    for (auto _ : st) ctx.time_iteration(st, s, [&] {
      for (int i = 0; i < kCopies; ++i) ctx.device.copy(to.data(), from.data(), copy_bytes_, s);
    });
  }

  // The suite's elementwise kernels' rate: GeLU forward over a buffer, every rank at once.
  void elementwise(benchmark::State& st, BenchContext& ctx) {
    const DType t = ctx.dtype();
    const std::size_t n = copy_bytes_ / 4;
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
  void collective(benchmark::State& st, BenchContext& ctx, comm_bench::Collective c, const comm_bench::Geometry& g) {
    const DType t = ctx.dtype();
    const Stream& s = ctx.device.default_stream();
    if (!curve_send_) {
      curve_send_ = ctx.alloc.allocate(curve_sizes_.back(), MemTag::buffers);
      curve_recv_ = ctx.alloc.allocate(curve_sizes_.back(), MemTag::buffers);
      ctx.device.fill_zero(curve_send_.data(), curve_sizes_.back(), s);
      ctx.device.fill_zero(curve_recv_.data(), curve_sizes_.back(), s);
    }
    const auto& spec = comm_bench::spec(c);
    for (int i = 0; i < kCollectiveWarmup; ++i) spec.launch(ctx.world, curve_send_.data(), curve_recv_.data(), g, t, s);
    ctx.world.wait(s);
    for (auto _ : st) ctx.time_iteration(st, s, [&] {
      spec.launch(ctx.world, curve_send_.data(), curve_recv_.data(), g, t, s);
      ctx.world.wait(s);
    });
  }

  static std::string curve_key(comm_bench::Collective c, std::uint64_t size_bytes) {
    return "profile/collective/" + std::string(comm_bench::collective_name(c)) + "/" + std::to_string(size_bytes);
  }

  static std::size_t small_message(const BenchContext& ctx) { return std::size_t(8) * ctx.world.size(); }

  std::string name_ = "this_machine", link_profile_;
  std::optional<HardwareProfile> link_;
  std::vector<Shape> shapes_;
  std::vector<std::uint64_t> curve_sizes_;  // the collectives' measured sizes, 4x apart
  Buffer curve_send_, curve_recv_;
  std::size_t copy_bytes_ = 1 << 20, big_message_ = 1 << 18;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::ProfileBench>(argc, argv); }
