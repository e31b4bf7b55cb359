// moebench_ppmoe_serial (ppmoe.serial): the claim of PPMoE Sec. 3.3.2 that N small expert
// GEMMs run one after another cost about one big GEMM of the same FLOPs. For N experts of
// T/N tokens each: serial GEMMs, one grouped GEMM, and one dense [T, h] x [h, f] GEMM.
// Writes <out>/ppmoe/serial.csv with the median times over repetitions, their spread and the
// ratios of the medians (target: grouped >= 0.9 x dense speed). One device, so one rank.
#include <cstdio>
#include <map>
#include "harness/bench.h"
#include "kernels/convert.h"
#include "kernels/grouped_gemm.h"
#include "runtime/host_copy.h"
#include "moe/init.h"
#include "models/paper_specs.h"

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
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    add_choices(app, "--widths", width_names_, {"medium", "6.7b", "tiny"},
                "Model widths: medium (GPT-3 Medium 1024/4096), 6.7b (4096/16384), tiny (64/256); default by scale");
    add_whole(app, "--tokens", tokens_opt_, 1, 1 << 30, "Tokens T in total (split over the N experts); default by scale");
    add_whole(app, "--max-experts", max_experts_opt_, 1, 1 << 16, "Largest N (powers of two from 1); default by scale");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "ppmoe.serial measures one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    switch (ctx.scale()) {
      case Scale::tiny: defaults({"tiny"}, 256, 8, 1, 3); break;
      case Scale::local: defaults({"medium"}, 1024, 64, 1, 2); break;
      case Scale::paper: defaults({"medium", "6.7b"}, 16384, 64, 3, 10); break;
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    if (max_experts_ & (max_experts_ - 1))
      return "--max-experts: '" + std::to_string(max_experts_) + "' is not a power of two; allowed: 1, 2, 4, 8, ...";
    if (tokens_ % max_experts_ != 0)
      return "--tokens: " + std::to_string(tokens_) + " must be divisible by --max-experts " + std::to_string(max_experts_);
    widths_.clear();
    std::uint64_t need = 0;
    for (const auto& n : width_names_) {
      if (n == "tiny") {
        widths_.push_back(Width{n, 64, 256});
      } else {
        const ModelSpec& m = model_spec(n == "medium" ? "gpt3-medium" : "gpt3-6.7b");
        widths_.push_back(Width{n, m.shape.hidden, m.shape.ffn});
      }
      const Width& w = widths_.back();
      const std::uint64_t es = dtype_size(ctx.dtype());
      need = std::max<std::uint64_t>(need, es * (std::uint64_t(tokens_) * (w.hidden + w.ffn) +
                                                 std::uint64_t(max_experts_ + 1) * w.hidden * w.ffn));
    }
    return ctx.check_fits(need, "--tokens/--max-experts/--widths");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/ppmoe", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (const Width& w : widths_)
      for (int n = 1; n <= max_experts_; n *= 2)
        for (const std::string& v : variants()) {
          const std::string name = "ppmoe_serial/" + w.name + "/" + std::to_string(n) + "/" + v;
          ctx.add(name, iters_, [this, &ctx, w, n, v](benchmark::State& st) { run(st, ctx, w, n, v); });
        }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    fixture_.reset();
    if (ctx.rt.rank() != 0) return 0;
    std::map<std::string, Spread> ms;
    for (const auto& r : runs)
      if (!r.error) ms[r.name] = r.time_ms();
    const bool grouped_is_serial = ctx.backend() == Backend::cpu;
    CsvTable t({"width", "hidden", "ffn", "tokens", "experts", "dense_ms", "dense_ms_min", "dense_ms_max", "serial_ms",
                "serial_ms_min", "serial_ms_max", "grouped_ms", "grouped_ms_min", "grouped_ms_max", "serial_over_dense",
                "grouped_over_dense", "dense_tflops", "grouped_tflops", "grouped_speed_vs_dense", "target_speed_vs_dense",
                "grouped_implementation", "repetitions"});
    std::printf("%-8s %6s %10s %10s %10s %14s %15s   (medians of %d repetitions)\n", "width", "N", "dense ms", "serial ms",
                "grouped ms", "serial/dense", "grouped speed", ctx.repetitions());
    for (const Width& w : widths_)
      for (int n = 1; n <= max_experts_; n *= 2) {
        const std::string key = "ppmoe_serial/" + w.name + "/" + std::to_string(n) + "/";
        const std::vector<std::string> v = variants();  // dense, serial, grouped
        if (!ms.count(key + v[0]) || !ms.count(key + v[1]) || !ms.count(key + v[2])) continue;
        const Spread d = ms[key + v[0]], s = ms[key + v[1]], g = ms[key + v[2]];
        const double flops = gemm_flops(tokens_, w.ffn, w.hidden);
        t.add_row({w.name, std::to_string(w.hidden), std::to_string(w.ffn), std::to_string(tokens_), std::to_string(n),
                   fmt(d.median), fmt(d.min), fmt(d.max), fmt(s.median), fmt(s.min), fmt(s.max), fmt(g.median),
                   fmt(g.min), fmt(g.max), fmt(s.median / d.median), fmt(g.median / d.median),
                   fmt(flops / d.median / 1e9), fmt(flops / g.median / 1e9), fmt(d.median / g.median),
                   fmt(kGroupedTarget),
                   grouped_is_serial ? "serial loop (OpenBLAS has no grouped GEMM)" : "cublasGemmGroupedBatchedEx",
                   std::to_string(d.samples)});
        std::printf("%-8s %6d %10.3f %10.3f %10.3f %14.3f %9.3f (>= %.1f)\n", w.name.c_str(), n, d.median, s.median,
                    g.median, s.median / d.median, d.median / g.median, kGroupedTarget);
      }
    if (grouped_is_serial) std::printf("(cpu backend: \"grouped\" is the serial loop; OpenBLAS has no grouped GEMM)\n");
    t.write(ctx.opts.out_dir + "/ppmoe/serial.csv", ctx.provenance);
    return 0;
  }

 private:
  void defaults(std::vector<std::string> widths, int tokens, int max_experts, int warmup, int iters) {
    if (width_names_.empty()) width_names_ = std::move(widths);
    tokens_ = tokens_opt_.value_or(tokens);
    max_experts_ = max_experts_opt_.value_or(max_experts);
    warmup_ = warmup;
    iters_ = iters;
  }

  // Sec. 3.3.2's three rows: one dense GEMM of all the rows, and the N experts' GEMMs one by one
  // (serial) and in one grouped call, the routes named by moe/config.h's list.
  static std::vector<std::string> variants() {
    return {"dense", expert_gemm_name(ExpertGemm::serial), expert_gemm_name(ExpertGemm::grouped)};
  }
  // The dense row is one GEMM, issued the serial way.
  static ExpertGemm route(const std::string& variant) { return parse_expert_gemm(variant).value_or(ExpertGemm::serial); }
  // The operands of one (width, N, variant), made at its first repetition and kept for the rest.
  struct Fixture {
    std::string key;
    Buffer x, wts, y, ptrs;
    std::vector<GemmArgs> problems;
  };

  Fixture& fixture(BenchContext& ctx, const Width& w, int n, const std::string& variant) {
    const std::string key = w.name + "/" + std::to_string(n) + "/" + variant;
    if (fixture_ && fixture_->key == key) return *fixture_;
    fixture_.reset();
    auto f = std::make_unique<Fixture>();
    f->key = key;
    const DType t = ctx.dtype();
    const std::size_t es = dtype_size(t), h = std::size_t(w.hidden), ff = std::size_t(w.ffn), T = std::size_t(tokens_);
    const int experts = parse_expert_gemm(variant) ? n : 1;
    f->x = device_from_f32(ctx.device, ctx.alloc, normal_vector(T * h, 1, 1, 1.f), t, MemTag::activations);
    f->wts = ctx.alloc.allocate(std::size_t(experts) * h * ff * es, MemTag::model_states);
    {
      const auto w0 = normal_vector(h * ff, 1, 2, 0.02f);  // each expert the same values: timing only
      Buffer one = device_from_f32(ctx.device, ctx.alloc, w0, t, MemTag::temporary);
      for (int e = 0; e < experts; ++e)
        ctx.device.copy(f->wts.as<char>() + e * h * ff * es, one.data(), h * ff * es, ctx.device.default_stream());
    }
    f->y = ctx.alloc.allocate(T * ff * es, MemTag::activations);
    f->ptrs = ctx.alloc.allocate(grouped_gemm_workspace_bytes(std::size_t(experts)), MemTag::buffers);
    const std::size_t rows = T / std::size_t(experts);
    for (int e = 0; e < experts; ++e)
      f->problems.push_back(dense_gemm(false, false, int(rows), int(ff), int(h), f->x.as<char>() + e * rows * h * es,
                                       f->wts.as<char>() + e * h * ff * es, f->y.as<char>() + e * rows * ff * es, t));
    const ExpertGemm mode = route(variant);
    const Exec ex = ctx.device.exec(ctx.device.default_stream());
    for (int i = 0; i < warmup_; ++i) grouped_gemm(ex, f->problems, mode, f->ptrs.data(), f->ptrs.bytes());
    ctx.device.synchronize();
    fixture_ = std::move(f);
    return *fixture_;
  }

  void run(benchmark::State& st, BenchContext& ctx, const Width& w, int n, const std::string& variant) {
    const DType t = ctx.dtype();
    // The grouped call has no tensor-core-free mode for 16-bit types: it would run serially.
    if (ctx.skip_if_any(st, route(variant) == ExpertGemm::grouped && ctx.backend() == Backend::cuda && t != DType::f32 &&
                                    ctx.opts.no_tensor_cores
                                ? std::optional<std::string>("grouped GEMM: cuBLAS has no 16-bit mode without tensor cores")
                                : std::nullopt))
      return;
    Fixture& f = fixture(ctx, w, n, variant);
    const ExpertGemm mode = route(variant);
    const Exec ex = ctx.device.exec(ctx.device.default_stream());
    const Stream& s = ctx.device.default_stream();
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, s, [&] { grouped_gemm(ex, f.problems, mode, f.ptrs.data(), f.ptrs.bytes()); });
    ctx.profile_end();
  }

  std::vector<std::string> width_names_;
  std::vector<Width> widths_;
  std::optional<int> tokens_opt_, max_experts_opt_;
  int tokens_ = 1, max_experts_ = 1, warmup_ = 1, iters_ = 3;
  std::unique_ptr<Fixture> fixture_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::SerialBench>(argc, argv); }
