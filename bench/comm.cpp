// moebench_comm: nccl-tests-style benchmark of all-to-all, all-reduce, all-gather,
// reduce-scatter and send/recv over a sweep of sizes, on MPI (cpu) or NCCL (cuda).
// Each size reports time (median over repetitions, with min and max), algbw, busbw and
// #wrong; the run exits 1 if anything is wrong. Writes <out>/comm/<collective>.csv.
#include <csignal>
#include <cstdio>
#include <sstream>
#include "comm/collective_table.h"
#include "harness/bench.h"
#include "kernels/convert.h"

namespace moebench {
namespace {

using collectives::Collective;

struct SweepDefaults { const char* min_bytes; const char* max_bytes; int warmup, iters; };
SweepDefaults defaults_for(Scale s) {
  switch (s) {
    case Scale::tiny: return {"1K", "64K", 1, 3};
    case Scale::local: return {"1K", "16M", 3, 10};
    case Scale::paper: return {"1K", "1G", 5, 20};
  }
  return {"1K", "16M", 3, 10};
}

class CommBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_comm"; }
  std::string description() const override {
    std::string names;
    for (const std::string& n : collectives::collective_names()) names += (names.empty() ? "" : ", ") + n;
    return "nccl-tests-style collective benchmark: " + names + ".";
  }
  bool takes_iteration_counts() const override { return true; }

  void add_options(CLI::App& app) override {
    add_text(app, "-b,--min-bytes", min_text_, "SIZE", "Smallest size (bytes; K/M/G suffixes); default by scale");
    add_text(app, "-e,--max-bytes", max_text_, "SIZE", "Largest size; default by scale");
    add_whole(app, "-f,--step-factor", step_, 2, 1024, "Multiply the size by this from min to max (default 2)");
    add_choices(app, "--collectives", collective_names_, collectives::collective_names(), "Which collectives (default: all)");
    add_whole(app, "--fail-rank", fail_rank_, 0, 1 << 20, "Self-test: this rank fails at its first measurement (the job must end)");
    add_flag(app, "--fail-with-send-in-flight", fail_in_flight_,
             "Self-test, with --fail-rank: the rank first leaves a send no peer receives in flight (its teardown "
             "would wait for it: the error must be said and the job ended first)");
    add_whole(app, "--stall-rank", stall_rank_, 0, 1 << 20,
              "Self-test: this rank stops itself (SIGSTOP) at its first measurement (--comm-timeout must end the job)");
    add_flag(app, "--corrupt-check", corrupt_, "Self-test: corrupt one received element before each check (#wrong > 0)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    const SweepDefaults d = defaults_for(ctx.scale());
    const std::string lo_text = min_text_.value_or(d.min_bytes), hi_text = max_text_.value_or(d.max_bytes);
    const auto lo = parse_size(lo_text), hi = parse_size(hi_text);
    const std::string sizes = "a size in bytes, e.g. 1024, 64K, 16M, 1G";
    if (!lo) return "--min-bytes: '" + lo_text + "' is not a size; allowed: " + sizes;
    if (!hi) return "--max-bytes: '" + hi_text + "' is not a size; allowed: " + sizes;
    if (*lo == 0) return "--min-bytes: '0' is out of range; allowed: " + sizes + ", at least 1";
    if (*hi < *lo) return "--max-bytes: " + hi_text + " is smaller than --min-bytes " + lo_text;
    min_bytes_ = *lo;
    max_bytes_ = *hi;
    step = step_.value_or(2);
    warmup_ = ctx.opts.warmup.value_or(d.warmup);
    iters_ = ctx.opts.iters.value_or(d.iters);
    if (fail_in_flight_ && !fail_rank_) return std::string("--fail-with-send-in-flight: needs --fail-rank R");
    if (fail_in_flight_ && ctx.world.size() < 2) return std::string("--fail-with-send-in-flight: needs 2 ranks or more");
    for (const auto& [opt, r] : {std::pair{"--fail-rank", fail_rank_}, std::pair{"--stall-rank", stall_rank_}})
      if (r && *r >= ctx.world.size())
        return std::string(opt) + ": '" + std::to_string(*r) + "' is not a rank; allowed: 0 to " + std::to_string(ctx.world.size() - 1);
    collectives_.clear();
    if (collective_names_.empty())
      collectives_ = collectives::all_collectives();
    else
      for (const auto& n : collective_names_) collectives_.push_back(*collectives::parse_collective(n));
    // Every collective must get at least one size, or the run would measure nothing and say nothing.
    for (Collective c : collectives_)
      if (sizes_for(c, ctx).empty()) {
        const collectives::Geometry smallest = collectives::geometry(c, 1ull << 40, ctx.world.size(), ctx.dtype());
        const std::uint64_t need = smallest.size_bytes / smallest.block;  // one element per block
        return "--min-bytes/--max-bytes: no size from " + lo_text + " to " + hi_text + " holds one " + ctx.opts.dtype +
               " element per rank for " + collectives::collective_name(c) + " on " + std::to_string(ctx.world.size()) +
               " rank(s); the smallest such size is " + std::to_string(need) + " bytes";
      }
    // send + receive buffers of the largest size, plus fp32 staging for 16-bit types on the GPU
    const std::uint64_t staging = ctx.dtype() == DType::f32 ? 0 : max_bytes_ * 4 / dtype_size(ctx.dtype());
    return ctx.check_fits(2 * max_bytes_ + staging, "--max-bytes " + hi_text);
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/comm", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    const DType t = ctx.dtype();
    send_ = ctx.alloc.allocate(max_bytes_, MemTag::buffers);
    recv_ = ctx.alloc.allocate(max_bytes_, MemTag::buffers);
    if (ctx.backend() == Backend::cuda && t != DType::f32)
      staging_ = ctx.alloc.allocate(max_bytes_ / dtype_size(t) * 4, MemTag::temporary);
    if (fail_in_flight_) {
      // NCCL connects a pair at its first use, blocking the host until the peer issues its side:
      // the ring is connected here, so that the failing rank's send waits on its stream, not its host.
      const int rank = ctx.world.rank(), n = ctx.world.size();
      const Stream& s = ctx.device.default_stream();
      ctx.world.send_recv(send_.data(), (rank + 1) % n, recv_.data(), (rank + n - 1) % n, 1, DType::f32, s);
      ctx.world.wait(s);
    }
    for (Collective c : collectives_)
      for (const collectives::Geometry& g : sizes_for(c, ctx)) {
        const std::string name = std::string("comm/") + collectives::collective_name(c) + "/" + std::to_string(g.size_bytes);
        ctx.add(name, iters_, [this, &ctx, c, g](benchmark::State& st) { run(st, ctx, c, g); }, benchmark::kMicrosecond);
      }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    std::int64_t total_wrong = 0;
    bool errors = false;
    if (ctx.rt.rank() == 0) {
      std::printf("#\n# moebench_comm: %s backend, %s communicator, %d ranks, %s, device %s\n#\n",
                  backend_name(ctx.backend()), ctx.world.kind().c_str(), ctx.world.size(), ctx.opts.dtype.c_str(),
                  ctx.device.info().name.c_str());
      std::printf("# %14s %12s %12s %12s %12s %12s %8s   (median of %d repetitions; busbw range min..max)\n",
                  "collective", "size(B)", "count", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", ctx.repetitions());
      for (Collective c : collectives_) {
        CsvTable table({"collective", "size_bytes", "count", "time_us", "time_us_min", "time_us_max", "algbw_GBps",
                        "busbw_GBps", "busbw_GBps_min", "busbw_GBps_max", "wrong", "repetitions", "iterations"});
        for (const RunRecord& r : runs) {
          const std::string prefix = std::string("comm/") + collectives::collective_name(c) + "/";
          if (r.name.rfind(prefix, 0) != 0) continue;
          if (r.error) {
            errors = true;
            std::printf("  %14s %12s  error: %s\n", collectives::collective_name(c), r.name.substr(prefix.size()).c_str(),
                        r.error_message.c_str());
            continue;
          }
          const double wrong = r.counter("wrong").max;
          total_wrong += static_cast<std::int64_t>(wrong);
          const double bytes = r.counter("size_bytes").median, count = r.counter("count").median;
          const double factor = collectives::bus_factor(c, ctx.world.size());
          const double t_med = r.time_ms().median * 1e3, t_min = r.time_ms().min * 1e3, t_max = r.time_ms().max * 1e3;
          const double algbw = bytes / 1e3 / t_med;  // bytes / us = MB/s; / 1e3 = GB/s
          const double busbw = algbw * factor;
          std::printf("  %14s %12.0f %12.0f %12.2f %12.3f %12.3f %8.0f   [%.3f .. %.3f]\n", collectives::collective_name(c),
                      bytes, count, t_med, algbw, busbw, wrong, bytes / 1e3 / t_max * factor, bytes / 1e3 / t_min * factor);
          table.add_row({collectives::collective_name(c), fmt(bytes, 15), fmt(count, 15), fmt(t_med), fmt(t_min),
                         fmt(t_max), fmt(algbw), fmt(busbw), fmt(bytes / 1e3 / t_max * factor),
                         fmt(bytes / 1e3 / t_min * factor), fmt(wrong, 15), std::to_string(r.repetitions()),
                         std::to_string(r.iterations)});
        }
        if (table.rows() > 0)
          table.write(ctx.opts.out_dir + "/comm/" + collectives::collective_name(c) + ".csv", ctx.provenance);
      }
      std::printf("# Out of bounds values : %lld %s\n#\n", static_cast<long long>(total_wrong), total_wrong ? "FAILED" : "OK");
    }
    return (total_wrong > 0 || errors) ? 1 : 0;
  }

 private:
  void upload(BenchContext& ctx, const std::vector<float>& host, void* dst, std::size_t count) {
    const Stream& s = ctx.device.default_stream();
    if (ctx.backend() == Backend::cpu || ctx.dtype() == DType::f32) {
      ctx.device.copy_to_device(dst, host.data(), count * 4, s);
      return;
    }
    ctx.device.copy_to_device(staging_.data(), host.data(), count * 4, s);
    convert_cuda(staging_.data(), DType::f32, dst, ctx.dtype(), count, s.handle);
  }

  void download(BenchContext& ctx, const void* src, std::vector<float>& host, std::size_t count) {
    const Stream& s = ctx.device.default_stream();
    host.resize(count);
    if (ctx.backend() == Backend::cpu || ctx.dtype() == DType::f32) {
      ctx.device.copy_to_host(host.data(), src, count * 4, s);
      return;
    }
    convert_cuda(src, ctx.dtype(), staging_.data(), DType::f32, count, s.handle);
    ctx.device.copy_to_host(host.data(), staging_.data(), count * 4, s);
  }

  void launch(BenchContext& ctx, Collective c, const collectives::Geometry& g) {
    collectives::spec(c).launch(ctx.world, send_.data(), recv_.data(), g, ctx.dtype(), ctx.device.default_stream());
  }

  void run(benchmark::State& st, BenchContext& ctx, Collective c, const collectives::Geometry& g) {
    const int rank = ctx.world.rank(), n = ctx.world.size();
    if (fail_rank_ && rank == *fail_rank_) {
      if (fail_in_flight_) {
        // 8 MiB, past NCCL's buffer (and the CPU model's): the send waits for a receive that never comes.
        const std::size_t count = std::size_t(2) << 20;
        // On a stream of its own, as a kernel on a GPU: the host goes on to its error.
        in_flight_stream_.emplace(ctx.device.create_stream("send_in_flight"));
        in_flight_ = ctx.alloc.allocate(count * 4, MemTag::temporary);
        ctx.world.send(in_flight_.data(), count, DType::f32, (rank + 1) % n, *in_flight_stream_);
      }
      throw Error("injected failure on rank " + std::to_string(rank) + " (--fail-rank)");
    }
    if (stall_rank_ && rank == *stall_rank_) ::raise(SIGSTOP);
    const Stream& s = ctx.device.default_stream();
    std::vector<float> host(g.send_count);
    collectives::fill_send(c, rank, g, host.data());
    upload(ctx, host, send_.data(), g.send_count);

    for (int i = 0; i < warmup_; ++i) launch(ctx, c, g);
    ctx.world.wait(s);
    ctx.profile_begin();
    for (auto _ : st)
      ctx.time_iteration(st, s, [&] {
        launch(ctx, c, g);
        ctx.world.wait(s);  // NCCL turns a hang or an asynchronous error into one here
      });
    ctx.profile_end();

    // Check one fresh run: zeroed receive buffer, so unwritten elements count as wrong.
    ctx.device.fill_zero(recv_.data(), g.recv_count * dtype_size(ctx.dtype()), s);
    launch(ctx, c, g);
    ctx.world.wait(s);
    download(ctx, recv_.data(), host, g.recv_count);
    if (corrupt_ && rank == 0) host[host.size() / 2] += 1000.f;
    const std::int64_t wrong = ctx.rt.sum(collectives::count_wrong(c, rank, n, g, host.data(), ctx.dtype()));

    st.SetBytesProcessed(static_cast<std::int64_t>(g.size_bytes) * st.iterations());
    st.counters["size_bytes"] = double(g.size_bytes);
    st.counters["count"] = double(g.recv_count);
    st.counters["wrong"] = double(wrong);
  }

  // The sizes a sweep visits for `c`: one per distinct layout, none that rounds to nothing.
  std::vector<collectives::Geometry> sizes_for(Collective c, const BenchContext& ctx) const {
    std::vector<collectives::Geometry> out;
    std::uint64_t prev = 0;
    for (std::uint64_t b = min_bytes_; b <= max_bytes_; b *= static_cast<std::uint64_t>(step)) {
      const collectives::Geometry g = collectives::geometry(c, b, ctx.world.size(), ctx.dtype());
      if (g.block > 0 && g.size_bytes != prev) out.push_back(g);
      prev = g.block > 0 ? g.size_bytes : prev;
      if (b > max_bytes_ / static_cast<std::uint64_t>(step)) break;
    }
    return out;
  }

  std::optional<std::string> min_text_, max_text_;
  std::optional<int> step_, fail_rank_, stall_rank_;
  bool fail_in_flight_ = false;
  int step = 2;
  std::vector<std::string> collective_names_;
  std::vector<Collective> collectives_;
  bool corrupt_ = false;
  std::uint64_t min_bytes_ = 0, max_bytes_ = 0;
  int warmup_ = 0, iters_ = 1;
  Buffer send_, recv_, staging_, in_flight_;
  std::optional<Stream> in_flight_stream_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::CommBench>(argc, argv); }
