// moebench_slowdown (runtime.slowdown, MPMoE Sec. 2.3 / Fig. 3): how much the runtime lets
// communication, computation and memory copies overlap on this machine, measured.
//  - alpha(y, x): the slowdown factor of operation y (comm: an all-to-all on a comm stream;
//    comp: a GEMM on a compute stream; mem: a large copy on a copy stream) while x runs beside
//    it (another of them, or "all" the others): alpha = time of y alone / time of y with x.
//    Above 0.5, overlapping y with x beats running them one after the other (MPMoE).
//  - overlap: a comm and a GEMM of about the same length started together, on two streams:
//    time / (comm alone + GEMM alone); 0.5 is perfect overlap, 1 none (target <= 0.6).
// Every pair is measured iteration by iteration against y alone in the same run. Sizes are
// calibrated at start so comm, comp and mem each take about as long as one GEMM. On the cpu
// backend every figure is taken twice: over the world communicator as configured (measured
// MPI, unless --link-bandwidth emulates one) and over an emulated link (--emulated-bandwidth)
// that puts communication in a cluster's regime; each row says which. The emulated link is slow
// (0.25 GB/s by default) because an emulated link can only add a wait on top of the real
// shared-memory copy, which needs CPU: with messages sized to last one GEMM, the real copy
// then stays a small part of the comm (at 1 GB/s it is a third, and competes with the GEMM
// for 2 cores: overlap 0.65 rather than 0.55). On a GPU the comm is
// NCCL (a world of one on a single GPU: say so when reading it).
// Writes <out>/runtime/slowdown.csv and <out>/runtime/overlap.csv.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include "harness/bench.h"
#include "kernels/gemm.h"
#include "moe/init.h"
#include "runtime/host_copy.h"
#include "runtime/side_by_side.h"

namespace moebench {
namespace {

const char* const kOps[] = {"comm", "comp", "mem"};
constexpr double kOverlapTarget = 0.6;

// The three operations over one link, sized to take about as long as each other.
struct Setup {
  std::string link_name;  // "world" or "emulated"
  std::unique_ptr<Communicator> comm;
  Stream streams[3];      // comm, comp, mem
  std::size_t comm_block = 0, mem_bytes = 0;
  Buffer send, recv, a, b, c, mem_src, mem_dst;
  std::map<std::string, double> alone_ms;  // calibration
  SideBySide ops;                          // the three, in kOps order
};

int index_of(const std::string& op) { return op == "comm" ? 0 : op == "comp" ? 1 : 2; }

class SlowdownBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_slowdown"; }
  std::string description() const override {
    return "Slowdown factors alpha(y, x) of comm / comp / memcpy beside each other (MPMoE Fig. 3) and comm-GEMM overlap.";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    add_whole(app, "--gemm-size", gemm_opt_, 16, 1 << 15, "The GEMM is N x N x N (default: by scale)");
    add_real(app, "--emulated-bandwidth", emu_bw_opt_, above(0),
             "Bandwidth of the emulated link the cpu rows are also taken over, GB/s (default 0.25)", 1e6);
    add_real(app, "--emulated-latency", emu_lat_opt_, at_least(0), "Its latency in microseconds (default 10)", 1e9);
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    switch (ctx.scale()) {
      case Scale::tiny: gemm_n_ = 128; warmup_ = 1; iters_ = 2; break;
      case Scale::local: gemm_n_ = 768; warmup_ = 1; iters_ = 3; break;
      case Scale::paper: gemm_n_ = 8192; warmup_ = 2; iters_ = 5; break;
    }
    gemm_n_ = gemm_opt_.value_or(gemm_n_);
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    if (ctx.backend() == Backend::cuda && (emu_bw_opt_ || emu_lat_opt_))
      return "--emulated-bandwidth: emulated links are a cpu-backend measurement; the GPU's links are measured as they are";
    links_ = {"world"};
    if (ctx.backend() == Backend::cpu && !ctx.opts.link_bandwidth_GBps) links_.push_back("emulated");
    const std::uint64_t es = dtype_size(ctx.dtype());
    return ctx.check_fits(3 * std::uint64_t(gemm_n_) * gemm_n_ * es + (std::uint64_t(1) << 30), "--gemm-size");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/runtime", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const std::string& link : links_) {
      for (const char* y : kOps)
        for (const char* x : {"comm", "comp", "mem", "all"}) {
          if (std::string(x) == y) continue;
          ctx.add("slowdown/" + link + "/" + y + "/" + x, iters_,
                  [this, &ctx, link, y = std::string(y), x = std::string(x)](benchmark::State& st) {
                    run_pair(st, ctx, setup(ctx, link), y, x);
                  });
        }
      ctx.add("overlap/" + link + "/comm+comp", iters_,
              [this, &ctx, link](benchmark::State& st) { run_overlap(st, ctx, setup(ctx, link)); });
    }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    setups_.clear();
    if (ctx.rt.rank() != 0) return 0;
    CsvTable slow({"y", "x", "link_used", "alpha", "alpha_min", "alpha_max", "y_alone_ms", "y_with_x_ms", "gemm_size",
                   "comm_bytes_per_peer", "mem_bytes", "repetitions"});
    CsvTable over({"link_used", "comm_ms", "comp_ms", "together_ms", "ratio", "ratio_min", "ratio_max", "target_ratio",
                   "perfect_ratio", "gemm_size", "comm_bytes_per_peer", "repetitions"});
    for (const auto& [key, words] : link_words_) std::printf("link %-9s = %s\n", key.c_str(), words.c_str());
    std::printf("%-30s %8s  [%s]   (alpha = y alone / y beside x; > 0.5: overlapping pays)\n", "", "alpha", "min .. max");
    for (const RunRecord& r : runs) {
      if (r.error) {
        std::printf("%-34s skipped: %s\n", r.name.c_str(), r.error_message.c_str());
        continue;
      }
      const auto parts = split(r.name);
      const std::string& link = parts[1];
      const std::string used = link_words_.at(link);
      if (parts[0] == "slowdown") {
        const Spread a = r.counter("alpha");
        slow.add_row({parts[2], parts[3], used, fmt(a.median, 4), fmt(a.min, 4), fmt(a.max, 4),
                      fmt(r.counter("alone_ms").median), fmt(r.time_ms().median), std::to_string(gemm_n_),
                      std::to_string(sizes_.at(link).first), std::to_string(sizes_.at(link).second),
                      std::to_string(r.repetitions())});
        std::printf("alpha(%s, %s) over %-9s %8.3f  [%.3f .. %.3f]\n", parts[2].c_str(), parts[3].c_str(), link.c_str(),
                    a.median, a.min, a.max);
      } else {
        const Spread q = r.counter("ratio");
        over.add_row({used, fmt(r.counter("comm_ms").median), fmt(r.counter("comp_ms").median), fmt(r.time_ms().median),
                      fmt(q.median, 4), fmt(q.min, 4), fmt(q.max, 4), fmt(kOverlapTarget), "0.5",
                      std::to_string(gemm_n_), std::to_string(sizes_.at(link).first), std::to_string(r.repetitions())});
        std::printf("overlap comm + GEMM over %-9s together / (comm + GEMM) = %.3f [%.3f .. %.3f] (target <= %.1f: %s)\n",
                    link.c_str(), q.median, q.min, q.max, kOverlapTarget, q.median <= kOverlapTarget ? "met" : "NOT met");
      }
    }
    slow.write(ctx.opts.out_dir + "/runtime/slowdown.csv", ctx.provenance);
    over.write(ctx.opts.out_dir + "/runtime/overlap.csv", ctx.provenance);
    return 0;
  }

 private:
  static std::vector<std::string> split(const std::string& name) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t p; (p = name.find('/', start)) != std::string::npos; start = p + 1) out.push_back(name.substr(start, p - start));
    out.push_back(name.substr(start));
    return out;
  }

  // Enqueues operation `op` (of `s`) `times` times on its stream.
  void launch(BenchContext& ctx, Setup& s, const std::string& op, int times) {
    const DType t = ctx.dtype();
    for (int i = 0; i < times; ++i) {
      if (op == "comm") {
        s.comm->all_to_all(s.send.data(), s.recv.data(), s.comm_block, t, s.streams[0]);
      } else if (op == "comp") {
        gemm(ctx.device.exec(s.streams[1]),
             dense_gemm(false, false, gemm_n_, gemm_n_, gemm_n_, s.a.data(), s.b.data(), s.c.data(), t));
      } else {
        ctx.device.copy(s.mem_dst.data(), s.mem_src.data(), s.mem_bytes, s.streams[2]);
      }
    }
  }
  // Milliseconds of `times` runs of `op`, on its stream, the slowest rank's.
  double time_op(BenchContext& ctx, Setup& s, const std::string& op, int times = 1) {
    return s.ops.alone(ctx.rt, ctx.device, index_of(op), times);
  }
  double median_of_3(BenchContext& ctx, Setup& s, const std::string& op) {
    double v[3];
    for (double& x : v) x = time_op(ctx, s, op);
    std::sort(v, v + 3);
    return v[1];
  }

  Setup& setup(BenchContext& ctx, const std::string& link) {
    if (auto it = setups_.find(link); it != setups_.end()) return *it->second;
    auto s = std::make_unique<Setup>();
    s->link_name = link;
    if (link == "world")
      s->comm = ctx.world.dup();
    else
      s->comm = make_world_communicator(ctx.rt, Backend::cpu,
                                        EmulatedLink{emu_bw_opt_.value_or(0.25), emu_lat_opt_.value_or(10.0)});
    link_words_[link] = s->comm->link();
    const char* names[3] = {"comm", "compute", "copy"};
    for (int i = 0; i < 3; ++i) s->streams[i] = ctx.device.create_stream(names[i] + std::string(" (") + link + ")");
    Setup* raw = s.get();
    for (const char* op : kOps)
      s->ops.launch.push_back([this, &ctx, raw, op = std::string(op)](int times) { launch(ctx, *raw, op, times); });
    s->ops.streams.assign(s->streams, s->streams + 3);
    s->ops.drain = [raw] { raw->comm->wait(raw->streams[0]); };
    const DType t = ctx.dtype();
    const std::size_t es = dtype_size(t), nn = std::size_t(gemm_n_) * gemm_n_, ranks = std::size_t(ctx.world.size());
    s->a = device_from_f32(ctx.device, ctx.alloc, normal_vector(nn, 3, 1, 1.f), t, MemTag::buffers);
    s->b = device_from_f32(ctx.device, ctx.alloc, normal_vector(nn, 3, 2, 1.f), t, MemTag::buffers);
    s->c = ctx.alloc.allocate(nn * es, MemTag::buffers);
    // Calibrate: comm and mem sized to take about as long as one GEMM (linear in bytes).
    for (int i = 0; i < warmup_ + 1; ++i) time_op(ctx, *s, "comp");
    const double gemm_ms = median_of_3(ctx, *s, "comp");
    auto size_comm = [&](std::size_t block) {
      s->comm_block = block;
      ctx.alloc.reserve(s->send, block * ranks * es, MemTag::buffers);
      ctx.alloc.reserve(s->recv, block * ranks * es, MemTag::buffers);
    };
    auto size_mem = [&](std::size_t bytes) {
      s->mem_bytes = bytes;
      if (ctx.backend() == Backend::cuda) {  // device -> pinned host: an offload
        ctx.alloc.reserve(s->mem_src, bytes, MemTag::buffers);
        s->mem_dst = ctx.alloc.allocate_pinned(bytes, MemTag::buffers, s->streams[2]);
      } else {
        ctx.alloc.reserve(s->mem_src, bytes, MemTag::buffers);
        ctx.alloc.reserve(s->mem_dst, bytes, MemTag::buffers);
      }
    };
    std::size_t block = 1 << 16, bytes = 1 << 22;
    for (int round = 0; round < 2; ++round) {
      size_comm(block);
      size_mem(bytes);
      time_op(ctx, *s, "comm");
      time_op(ctx, *s, "mem");
      const double c = std::max(median_of_3(ctx, *s, "comm"), 1e-3), m = std::max(median_of_3(ctx, *s, "mem"), 1e-3);
      // Every rank must agree on the sizes (the all-to-all needs it): the slowest rank's times decide.
      block = std::clamp<std::size_t>(std::size_t(double(block) * gemm_ms / c), 256, (std::size_t(1) << 28) / (ranks * es));
      bytes = std::clamp<std::size_t>(std::size_t(double(bytes) * gemm_ms / m), 4096, std::size_t(1) << 30);
    }
    size_comm(block);
    size_mem(bytes);
    for (const char* op : kOps) s->alone_ms[op] = median_of_3(ctx, *s, op);
    sizes_[link] = {s->comm_block * es, s->mem_bytes};
    setups_[link] = std::move(s);
    return *setups_[link];
  }

  // alpha(y, x): y alone, then y with x (or all the others) kept busy on their streams for all of y.
  void run_pair(benchmark::State& st, BenchContext& ctx, Setup& s, const std::string& y, const std::string& x) {
    std::vector<std::string> background;
    for (const char* op : kOps)
      if (op != y && (x == "all" || x == op)) background.push_back(op);
    std::vector<int> others;
    for (const auto& op : background) others.push_back(index_of(op));
    std::vector<double> alone_ms;
    for (const char* op : kOps) alone_ms.push_back(s.alone_ms[op]);
    double alone = 0, with = 0;
    for (auto _ : st) {
      alone += time_op(ctx, s, y);
      const double ms = s.ops.beside(ctx.rt, ctx.device, index_of(y), others, alone_ms);
      st.SetIterationTime(ms / 1e3);
      with += ms;
    }
    st.counters["alpha"] = alone / with;
    st.counters["alone_ms"] = alone / double(st.iterations());
  }

  // The comm and the GEMM started together on their streams, against each alone.
  void run_overlap(benchmark::State& st, BenchContext& ctx, Setup& s) {
    double comm = 0, comp = 0, both = 0;
    for (auto _ : st) {
      comm += time_op(ctx, s, "comm");
      comp += time_op(ctx, s, "comp");
      const double ms = ctx.time_iteration(st, ctx.device.default_stream(), [&] {
        Event go(ctx.backend()), comm_done(ctx.backend()), comp_done(ctx.backend());
        go.record(ctx.device.default_stream());
        go.make_wait(s.streams[0]);
        go.make_wait(s.streams[1]);
        launch(ctx, s, "comm", 1);
        launch(ctx, s, "comp", 1);
        comm_done.record(s.streams[0]);
        comp_done.record(s.streams[1]);
        comm_done.make_wait(ctx.device.default_stream());
        comp_done.make_wait(ctx.device.default_stream());
      });
      both += ms;
    }
    const double n = double(st.iterations());
    st.counters["ratio"] = both / (comm + comp);
    st.counters["comm_ms"] = comm / n;
    st.counters["comp_ms"] = comp / n;
  }

  std::optional<int> gemm_opt_;
  std::optional<double> emu_bw_opt_, emu_lat_opt_;
  int gemm_n_ = 768, warmup_ = 1, iters_ = 3;
  std::vector<std::string> links_;
  std::map<std::string, std::unique_ptr<Setup>> setups_;
  std::map<std::string, std::string> link_words_;
  std::map<std::string, std::pair<std::size_t, std::size_t>> sizes_;  // comm bytes per peer, mem bytes
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::SlowdownBench>(argc, argv); }
