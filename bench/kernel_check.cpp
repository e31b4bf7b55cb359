// moebench_kernel_check: the MoE layer's kernels, each version checked against the CPU reference
// and then timed, on one device, as a program of its own (llm.c's dev/cuda programs, one per
// kernel): the local experts' forward and backward by every expert-GEMM route
// (kernels/expert_gemm_routes.h), the gate's softmax + top-k, and the permutations between token
// order and expert order (dispatch, combine). On the cpu backend it checks and times the CPU
// versions; on cuda each CUDA version against the CPU's fp32 reference. A version outside its
// tolerance is still timed, and the run exits 1 with a line naming what differs. The iteration
// place for kernel work: no layer, gate or exchange around the kernel. Writes
// <out>/kernels/check.csv.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include "harness/bench.h"
#include "kernels/gating.h"
#include "kernels/permute.h"
#include "moe/experts.h"
#include "moe/init.h"
#include "runtime/host_copy.h"

namespace moebench {
namespace {

constexpr std::uint64_t kSeed = 20261208;

// Relative L2 distance of `got` from `want`; 0 for two empty or zero vectors.
double rel_l2(const std::vector<float>& got, const std::vector<float>& want) {
  double d = 0, w = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double diff = double(got[i]) - want[i];
    d += diff * diff;
    w += double(want[i]) * want[i];
  }
  return w > 0 ? std::sqrt(d / w) : std::sqrt(d);
}

struct Outcome {
  std::string kernel, version;
  double rel_l2 = 0, tolerance = 0;
  bool ok() const { return rel_l2 <= tolerance; }
};

class KernelCheck final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_kernel_check"; }
  std::string description() const override {
    return "The MoE layer's kernels (expert-GEMM routes, gate, permutations): each version checked against the CPU "
           "reference, then timed, on one device.";
  }
  bool takes_iteration_counts() const override { return true; }
  void add_options(CLI::App& app) override {
    add_choices(app, "--routes", routes_opt_, expert_gemm_names(),
                "Expert-GEMM routes to check and time (default: all)");
    add_whole(app, "--tokens", tokens_opt_, 1, 1 << 22, "Tokens T (default by scale)");
    add_whole(app, "--experts", experts_opt_, 1, 1 << 12, "Experts E, all local (default by scale)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "moebench_kernel_check checks one device, so it runs on one rank; got " +
             std::to_string(ctx.world.size()) +
             " (launch it with 1 rank)";
    switch (ctx.scale()) {
      case Scale::tiny: shape(64, 32, 64, 4, 2, 1, 2); break;
      case Scale::local: shape(2048, 256, 1024, 8, 2, 1, 3); break;
      case Scale::paper: shape(16384, 1024, 4096, 16, 2, 3, 10); break;
    }
    warmup_ = ctx.opts.warmup.value_or(warmup_);
    iters_ = ctx.opts.iters.value_or(iters_);
    routes_.clear();
    for (const std::string& r : routes_opt_.empty() ? expert_gemm_names() : routes_opt_)
      routes_.push_back(*parse_expert_gemm(r));
    // Rows per expert, uneven (1 : 2 : 3 : 4 : 1 : ...), every assignment kept: R = T k.
    const int R = tokens_ * top_k_;
    rows_.assign(experts_, 0);
    int weights = 0;
    for (int e = 0; e < experts_; ++e) weights += 1 + e % 4;
    for (int e = 0, given = 0; e < experts_; ++e)
      given += rows_[e] = e + 1 < experts_ ? R * (1 + e % 4) / weights : R - given;
    const std::uint64_t es = dtype_size(ctx.dtype()), T = tokens_, h = hidden_, f = ffn_, E = experts_;
    // Weights and their gradients; x, y, dy, dx; the activations h and a; the gate's fp32 arrays.
    return ctx.check_fits(es * (4 * E * h * f + 4 * T * top_k_ * h + 2 * T * top_k_ * f) + 4 * T * E * 2,
                          "--tokens/--experts");
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/kernels", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (ExpertGemm r : routes_)
      ctx.add(std::string("kernels/experts/") + expert_gemm_name(r), iters_,
              [this, &ctx, r](benchmark::State& st) { run_experts(st, ctx, r); });
    ctx.add("kernels/gate/softmax_topk", iters_, [this, &ctx](benchmark::State& st) { run_gate(st, ctx); });
    for (const char* way : {"dispatch", "combine"})
      ctx.add(std::string("kernels/permute/") + way, iters_,
              [this, &ctx, way](benchmark::State& st) { run_permute(st, ctx, std::string(way) == "combine"); });
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>& runs) override {
    if (ctx.rt.rank() != 0) return 0;
    CsvTable t({"kernel", "version", "tokens", "hidden", "ffn", "experts", "top_k", "reference", "rel_l2", "tolerance",
                "check", "ms", "ms_min", "ms_max", "repetitions"});
    int failed = 0;
    const std::string reference = "the CPU's fp32 result (the experts: the serial route's)";
    for (const RunRecord& r : runs) {
      const auto it = outcomes_.find(r.name);
      if (r.error || it == outcomes_.end()) continue;
      const Outcome& o = it->second;
      const Spread s = r.time_ms();
      failed += !o.ok();
      t.add_row({o.kernel, o.version, std::to_string(tokens_), std::to_string(hidden_), std::to_string(ffn_),
                 std::to_string(experts_), std::to_string(top_k_), reference, fmt(o.rel_l2, 3), fmt(o.tolerance, 2),
                 o.ok() ? "ok" : "FAILED", fmt(s.median), fmt(s.min), fmt(s.max), std::to_string(s.samples)});
      std::printf("%-8s %-12s rel. L2 %.2e (<= %.0e: %s)  %10.4f ms  [%.4f .. %.4f]\n", o.kernel.c_str(),
                  o.version.c_str(), o.rel_l2, o.tolerance, o.ok() ? "ok" : "FAILED", s.median, s.min, s.max);
    }
    t.write(ctx.opts.out_dir + "/kernels/check.csv", ctx.provenance);
    if (failed)
      std::fprintf(stderr, "moebench_kernel_check: %d version(s) outside their tolerance (check.csv: FAILED)\n", failed);
    return failed ? 1 : 0;
  }

 private:
  void shape(int tokens, int hidden, int ffn, int experts, int top_k, int warmup, int iters) {
    tokens_ = tokens_opt_.value_or(tokens), hidden_ = hidden, ffn_ = ffn, experts_ = experts_opt_.value_or(experts);
    top_k_ = std::min(top_k, experts_), warmup_ = warmup, iters_ = iters;
  }
  // Relative L2 allowed: fp32 on the CPU, summed in other orders; on a GPU, TF32 GEMMs or 16-bit
  // values (what the GEMMs and the sums of rows hold), and exp's last bits in the gate.
  double tolerance(const BenchContext& ctx, bool gemms, bool sixteen_bit_values) const {
    if (ctx.backend() == Backend::cpu) return 1e-5;
    if (sixteen_bit_values && ctx.dtype() != DType::f32) return 2e-2;
    return gemms ? 5e-3 : 1e-4;
  }
  std::vector<float> host(BenchContext& ctx, const void* p, std::size_t n) {
    std::vector<float> v = host_f32(ctx.device, ctx.alloc, p, n, ctx.dtype());
    ctx.device.synchronize();
    return v;
  }
  MoEConfig experts_config(ExpertGemm route, DType t) const {
    MoEConfig c;
    c.hidden = hidden_, c.ffn = ffn_, c.experts = experts_, c.top_k = top_k_, c.expert_gemm = route, c.dtype = t;
    return c;
  }
  void run_experts(benchmark::State& st, BenchContext& ctx, ExpertGemm route) {
    const int R = tokens_ * top_k_;
    const std::size_t h = hidden_, n = std::size_t(experts_) * hidden_ * ffn_;
    const auto x_host = normal_vector(R * h, kSeed, 1, 1.f), dy_host = normal_vector(R * h, kSeed, 2, 1.f);
    std::vector<std::int32_t> offsets(experts_ + 1, 0);
    for (int e = 0; e < experts_; ++e) offsets[e + 1] = offsets[e] + rows_[e];
    if (want_.empty()) {  // the reference: the serial route, fp32, on a CPU device
      Device cpu = Device::open(Backend::cpu);
      TrackingAllocator cpu_alloc(Backend::cpu);
      const MoEConfig cfg = experts_config(ExpertGemm::serial, DType::f32);
      Experts ref(cfg, cpu, cpu_alloc, 0, experts_);
      const Stream& s = cpu.default_stream();
      ref.init(kSeed, s);
      std::vector<float> y(R * h), dx(R * h);
      ref.zero_grad(s);
      ExpertsContext c = ref.forward(x_host.data(), rows_, y.data(), s);
      ref.backward(c, dy_host.data(), dx.data(), s);
      cpu.synchronize();
      want_ = {y, dx, std::vector<float>(ref.w1_grad().as<float>(), ref.w1_grad().as<float>() + n),
               std::vector<float>(ref.w2_grad().as<float>(), ref.w2_grad().as<float>() + n)};
    }
    const MoEConfig cfg = experts_config(route, ctx.dtype());
    const std::size_t es = dtype_size(cfg.dtype);
    Experts e(cfg, ctx.device, ctx.alloc, 0, experts_);
    const Stream& s = ctx.device.default_stream();
    e.init(kSeed, s);
    Buffer x = device_from_f32(ctx.device, ctx.alloc, x_host, cfg.dtype, MemTag::activations);
    Buffer dy = device_from_f32(ctx.device, ctx.alloc, dy_host, cfg.dtype, MemTag::activations);
    Buffer y = ctx.alloc.allocate(R * h * es, MemTag::activations);
    Buffer dx = ctx.alloc.allocate(R * h * es, MemTag::activations);
    Buffer device_offsets = ctx.alloc.allocate(offsets.size() * 4, MemTag::buffers);
    ctx.device.copy_to_device(device_offsets.data(), offsets.data(), offsets.size() * 4, s);
    // One forward and backward: the segmented route reads the rows' offsets on the device.
    auto step = [&] {
      e.zero_grad(s);
      ExpertsContext c = route == ExpertGemm::segmented
                             ? e.forward(x.data(), device_offsets.as<std::int32_t>(), std::size_t(R), y.data(), s)
                             : e.forward(x.data(), rows_, y.data(), s);
      e.backward(c, dy.data(), dx.data(), s);
    };
    for (int i = 0; i < std::max(warmup_, 1); ++i) step();
    ctx.device.synchronize();
    const std::string key = std::string("kernels/experts/") + expert_gemm_name(route);
    if (!outcomes_.count(key)) {
      const std::vector<std::vector<float>> got = {host(ctx, y.data(), R * h), host(ctx, dx.data(), R * h),
                                                   host(ctx, e.w1_grad().data(), n), host(ctx, e.w2_grad().data(), n)};
      double worst = 0;
      for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, rel_l2(got[i], want_[i]));
      outcomes_[key] = {"experts", expert_gemm_name(route), worst, tolerance(ctx, true, true)};
    }
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, s, step);
    ctx.profile_end();
  }

  void run_gate(benchmark::State& st, BenchContext& ctx) {
    const GateShape g{tokens_, experts_, 1, top_k_};
    const auto logits = normal_vector(std::size_t(tokens_) * experts_, kSeed, 3, 1.f);
    std::vector<float> probs(logits.size()), weight(std::size_t(tokens_) * g.slots());
    std::vector<std::int32_t> expert(weight.size());
    softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
    const Stream& s = ctx.device.default_stream();
    Buffer d_logits = device_from_f32(ctx.device, ctx.alloc, logits, DType::f32, MemTag::activations);
    Buffer d_probs = ctx.alloc.allocate(probs.size() * 4, MemTag::activations);
    Buffer d_weight = ctx.alloc.allocate(weight.size() * 4, MemTag::activations);
    Buffer d_expert = ctx.alloc.allocate(expert.size() * 4, MemTag::activations);
    const Exec ex = ctx.device.exec(s);
    auto step = [&] {
      softmax_topk(ex, g, d_logits.as<float>(), d_probs.as<float>(), d_expert.as<std::int32_t>(), d_weight.as<float>());
    };
    for (int i = 0; i < std::max(warmup_, 1); ++i) step();
    ctx.device.synchronize();
    if (!outcomes_.count("kernels/gate/softmax_topk")) {
      std::vector<std::int32_t> got_expert(expert.size());
      ctx.device.copy_to_host(got_expert.data(), d_expert.data(), expert.size() * 4, s);
      const auto got_probs = host_f32(ctx.device, ctx.alloc, d_probs.data(), probs.size(), DType::f32);
      const auto got_weight = host_f32(ctx.device, ctx.alloc, d_weight.data(), weight.size(), DType::f32);
      ctx.device.synchronize();
      // A token routed to another expert is as far off as it can be.
      const double routed = got_expert == expert ? 0.0 : 1.0;
      outcomes_["kernels/gate/softmax_topk"] = {"gate", "softmax_topk",
                                                std::max({routed, rel_l2(got_probs, probs), rel_l2(got_weight, weight)}),
                                                tolerance(ctx, false, false)};
    }
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, s, step);
    ctx.profile_end();
  }

  void run_permute(benchmark::State& st, BenchContext& ctx, bool combine) {
    const int S = top_k_, T = tokens_, R = T * S;
    const std::size_t h = hidden_;
    // Each (token, slot) to an expert, in expert-major rows: row = the expert's first row + its rank there.
    std::vector<std::int32_t> row_of(static_cast<std::size_t>(R), 0);
    std::vector<int> count(experts_, 0), base(experts_, 0);
    for (int i = 0; i < R; ++i) ++count[(i * 7 + i / S) % experts_];
    for (int e = 1; e < experts_; ++e) base[e] = base[e - 1] + count[e - 1];
    std::fill(count.begin(), count.end(), 0);
    for (int i = 0; i < R; ++i) {
      const int e = (i * 7 + i / S) % experts_;
      row_of[i] = base[e] + count[e]++;
    }
    const auto weight = normal_vector(std::size_t(R), kSeed, 4, 0.5f);
    // What a 16-bit device holds of the inputs, so that the reference moves the same values.
    const auto x_in = normal_vector((combine ? R : T) * h, kSeed, 5, 1.f);
    const Stream& s = ctx.device.default_stream();
    Buffer d_in = device_from_f32(ctx.device, ctx.alloc, x_in, ctx.dtype(), MemTag::activations);
    const std::vector<float> in = host(ctx, d_in.data(), x_in.size());
    Buffer d_row_of = ctx.alloc.allocate(row_of.size() * 4, MemTag::buffers);
    ctx.device.copy_to_device(d_row_of.data(), row_of.data(), row_of.size() * 4, s);
    Buffer d_weight = device_from_f32(ctx.device, ctx.alloc, weight, DType::f32, MemTag::activations);
    const std::size_t out_rows = combine ? T : R;
    Buffer d_out = ctx.alloc.allocate(out_rows * h * dtype_size(ctx.dtype()), MemTag::activations);
    const RowMap m{T, S, hidden_, d_row_of.as<std::int32_t>()};
    const Exec ex = ctx.device.exec(s);
    auto step = [&] {
      if (combine) combine_rows(ex, m, d_in.data(), d_weight.as<float>(), d_out.data(), ctx.dtype());
      else dispatch_rows(ex, m, d_in.data(), d_out.data(), ctx.dtype());
    };
    for (int i = 0; i < std::max(warmup_, 1); ++i) step();
    ctx.device.synchronize();
    const std::string key = std::string("kernels/permute/") + (combine ? "combine" : "dispatch");
    if (!outcomes_.count(key)) {
      std::vector<float> want(out_rows * h);
      const RowMap host_map{T, S, hidden_, row_of.data()};
      if (combine) combine_rows_cpu(host_map, in.data(), weight.data(), want.data());
      else dispatch_rows_cpu(host_map, in.data(), want.data());
      outcomes_[key] = {"permute", combine ? "combine" : "dispatch", rel_l2(host(ctx, d_out.data(), want.size()), want),
                        combine ? tolerance(ctx, false, true) : 0.0};  // dispatch copies: exact
    }
    ctx.profile_begin();
    for (auto _ : st) ctx.time_iteration(st, s, step);
    ctx.profile_end();
  }

  std::vector<std::string> routes_opt_;
  std::optional<int> tokens_opt_, experts_opt_;
  std::vector<ExpertGemm> routes_;
  int tokens_ = 0, hidden_ = 0, ffn_ = 0, experts_ = 0, top_k_ = 1, warmup_ = 1, iters_ = 3;
  std::vector<int> rows_;
  std::vector<std::vector<float>> want_;  // the experts' reference: y, dx, dW1, dW2
  std::map<std::string, Outcome> outcomes_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::KernelCheck>(argc, argv); }
