// moebench_ppmoe_serial (ppmoe.serial): the claim of PPMoE Sec. 3.3.2 that N small expert
// GEMMs run one after another cost about one big GEMM of the same FLOPs. For N experts of
// T/N tokens each: serial GEMMs, one grouped GEMM, and one dense [T, h] x [h, f] GEMM.
// Writes <out>/ppmoe/serial.csv with the time ratios (target: grouped >= 0.9 x dense speed).
#include <cstdio>
#include <map>
#include "harness/bench.h"
#include "kernels/convert.h"
#include "kernels/grouped_gemm.h"
#include "bench/moe_host.h"
#include "moe/init.h"

namespace moebench {
namespace {

struct Width { std::string name; int hidden, ffn; };
constexpr double kGroupedTarget = 0.9;

class SerialBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_ppmoe_serial"; }
  std::string description() const override {
    return "N serial expert GEMMs vs one grouped GEMM vs one dense GEMM of equal FLOPs (PPMoE Sec. 3.3.2).";
  }
  void add_options(CLI::App& app) override {
    app.add_option("--widths", width_names_, "Model widths: medium (GPT-3 Medium 1024/4096), 6.7b (4096/16384), tiny (64/256)")
        ->check(CLI::IsMember({"medium", "6.7b", "tiny"}))
        ->delimiter(',');
    app.add_option("--tokens", tokens_, "Tokens T in total (split over the N experts)");
    app.add_option("--max-experts", max_experts_, "Largest N (powers of two from 1)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    switch (ctx.scale()) {
      case Scale::tiny: defaults({"tiny"}, 256, 8, 1, 3); break;
      case Scale::local: defaults({"medium"}, 1024, 64, 1, 3); break;
      case Scale::paper: defaults({"medium", "6.7b"}, 16384, 64, 3, 10); break;
    }
    if (ctx.opts.warmup >= 0) warmup_ = ctx.opts.warmup;
    if (ctx.opts.iters > 0) iters_ = ctx.opts.iters;
    if (tokens_ < 1) return "--tokens: must be >= 1, got " + std::to_string(tokens_);
    if (max_experts_ < 1) return "--max-experts: must be >= 1, got " + std::to_string(max_experts_);
    if (tokens_ % max_experts_ != 0)
      return "--tokens: " + std::to_string(tokens_) + " must be divisible by --max-experts " + std::to_string(max_experts_);
    widths_.clear();
    std::uint64_t need = 0;
    for (const auto& n : width_names_) {
      widths_.push_back(n == "medium" ? Width{n, 1024, 4096} : n == "6.7b" ? Width{n, 4096, 16384} : Width{n, 64, 256});
      const Width& w = widths_.back();
      const std::uint64_t es = dtype_size(ctx.dtype());
      need = std::max<std::uint64_t>(need, es * (std::uint64_t(tokens_) * (w.hidden + w.ffn) +
                                                 std::uint64_t(max_experts_ + 1) * w.hidden * w.ffn));
    }
    return ctx.check_fits(need, "--tokens/--max-experts/--widths");
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Width& w : widths_)
      for (int n = 1; n <= max_experts_; n *= 2)
        for (const char* v : {"dense", "serial", "grouped"}) {
          const std::string name = "ppmoe_serial/" + w.name + "/" + std::to_string(n) + "/" + v;
          benchmark::RegisterBenchmark(name.c_str(), [this, &ctx, w, n, v](benchmark::State& st) { run(st, ctx, w, n, v); })
              ->UseManualTime()
              ->Iterations(iters_)
              ->Unit(benchmark::kMillisecond);
        }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, double> ms;
    for (const auto& r : runs)
      if (!r.error) ms[r.name.substr(0, r.name.find("/iterations"))] = r.seconds_per_iter * 1e3;
    CsvTable t({"width", "hidden", "ffn", "tokens", "experts", "dense_ms", "serial_ms", "grouped_ms", "serial_over_dense",
                "grouped_over_dense", "dense_tflops", "grouped_tflops", "grouped_speed_vs_dense", "target_speed_vs_dense"});
    std::printf("%-8s %6s %10s %10s %10s %14s %15s\n", "width", "N", "dense ms", "serial ms", "grouped ms",
                "serial/dense", "grouped speed");
    for (const Width& w : widths_)
      for (int n = 1; n <= max_experts_; n *= 2) {
        const std::string key = "ppmoe_serial/" + w.name + "/" + std::to_string(n) + "/";
        if (!ms.count(key + "dense") || !ms.count(key + "serial") || !ms.count(key + "grouped")) continue;
        const double d = ms[key + "dense"], s = ms[key + "serial"], g = ms[key + "grouped"];
        const double flops = gemm_flops(tokens_, w.ffn, w.hidden);
        t.add_row({w.name, std::to_string(w.hidden), std::to_string(w.ffn), std::to_string(tokens_), std::to_string(n),
                   fmt(d), fmt(s), fmt(g), fmt(s / d), fmt(g / d), fmt(flops / d / 1e9), fmt(flops / g / 1e9), fmt(d / g),
                   fmt(kGroupedTarget)});
        std::printf("%-8s %6d %10.3f %10.3f %10.3f %14.3f %9.3f (>= %.1f)\n", w.name.c_str(), n, d, s, g, s / d, d / g,
                    kGroupedTarget);
      }
    t.write(ctx.opts.out_dir + "/ppmoe/serial.csv", ctx.provenance);
    return 0;
  }

 private:
  void defaults(std::vector<std::string> widths, int tokens, int max_experts, int warmup, int iters) {
    if (width_names_.empty()) width_names_ = std::move(widths);
    if (tokens_ < 0) tokens_ = tokens;
    if (max_experts_ < 0) max_experts_ = max_experts;
    warmup_ = warmup;
    iters_ = iters;
  }

  void run(benchmark::State& st, BenchContext& ctx, const Width& w, int n, const std::string& variant) {
    const DType t = ctx.dtype();
    // The grouped call has no tensor-core-free mode for 16-bit types: it would run serially.
    if (ctx.skip_if_any(st, variant == "grouped" && ctx.backend() == Backend::cuda && t != DType::f32 &&
                                    ctx.opts.no_tensor_cores
                                ? std::optional<std::string>("grouped GEMM: cuBLAS has no 16-bit mode without tensor cores")
                                : std::nullopt))
      return;
    const std::size_t es = dtype_size(t), h = std::size_t(w.hidden), f = std::size_t(w.ffn), T = std::size_t(tokens_);
    const int experts = variant == "dense" ? 1 : n;
    Buffer x = device_from_f32(ctx.device, ctx.alloc, normal_vector(T * h, 1, 1, 1.f), t, MemTag::activations);
    Buffer wts = ctx.alloc.allocate(std::size_t(experts) * h * f * es, MemTag::model_states);
    {
      const auto w0 = normal_vector(h * f, 1, 2, 0.02f);  // each expert the same values: timing only
      Buffer one = device_from_f32(ctx.device, ctx.alloc, w0, t, MemTag::temporary);
      for (int e = 0; e < experts; ++e)
        ctx.device.copy(wts.as<char>() + e * h * f * es, one.data(), h * f * es, ctx.device.default_stream());
    }
    Buffer y = ctx.alloc.allocate(T * f * es, MemTag::activations);
    Buffer ptrs = ctx.alloc.allocate(grouped_gemm_workspace_bytes(std::size_t(experts)), MemTag::buffers);
    std::vector<GemmArgs> problems;
    const std::size_t rows = T / std::size_t(experts);
    for (int e = 0; e < experts; ++e)
      problems.push_back(dense_gemm(false, false, int(rows), int(f), int(h), x.as<char>() + e * rows * h * es,
                                    wts.as<char>() + e * h * f * es, y.as<char>() + e * rows * f * es, t));
    const ExpertGemm mode = variant == "grouped" ? ExpertGemm::grouped : ExpertGemm::serial;
    const Exec ex = ctx.device.exec(ctx.device.default_stream());
    const Stream& s = ctx.device.default_stream();
    for (int i = 0; i < warmup_; ++i) grouped_gemm(ex, problems, mode, ptrs.data(), ptrs.bytes());
    ctx.device.synchronize();
    Event start(ctx.backend()), stop(ctx.backend());
    ctx.profile_begin();
    for (auto _ : st) {
      start.record(s);
      grouped_gemm(ex, problems, mode, ptrs.data(), ptrs.bytes());
      stop.record(s);
      stop.synchronize();
      ctx.set_iteration_time(st, Event::elapsed_ms(start, stop));
    }
    ctx.profile_end();
    st.counters["TFLOPs"] = benchmark::Counter(gemm_flops(tokens_, w.ffn, w.hidden) / 1e12 * st.iterations(),
                                               benchmark::Counter::kIsRate);
  }

  std::vector<std::string> width_names_;
  std::vector<Width> widths_;
  int tokens_ = -1, max_experts_ = -1, warmup_ = 1, iters_ = 3;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) {
  moebench::SerialBench bench;
  return moebench::bench_main(argc, argv, bench);
}
