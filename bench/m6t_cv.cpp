// moebench_m6t_cv (m6t.cv, M6-T Fig. 1 and Sec. 3.1): the load-balance coefficient of
// variation c_v = sigma/mu of the tokens each expert computes, per layer, while a stack of
// MoE layers trains, with and without the auxiliary loss, and the share of tokens dropped at
// capacity factors 1.25 and 2.0 (Eq. 2).
// Synthetic data: tokens from a mixture of Gaussian clusters whose frequencies follow a Zipf
// law (cluster k has weight 1/(k+1)^s), so routing starts out unbalanced, as real text does.
// Task: regress a fixed random linear map of the input through residual MoE layers
// x_{l+1} = x_l + MoE_l(x_l) (mean squared error), by plain SGD. Writes <out>/m6t/cv.csv.
#include <cmath>
#include <cstdio>
#include "bench/moe_host.h"
#include "harness/bench.h"
#include "kernels/axpy.h"
#include "kernels/gemm.h"
#include "moe/init.h"
#include "moe/moe_layer.h"

namespace moebench {
namespace {

struct Run { double gamma; bool aux; };
struct Row { double gamma; bool aux; int step, layer; double cv, cv_routed, dropped, aux_loss, task_loss; };

class CvBench final : public BenchProgram {
 public:
  std::string name() const override { return "moebench_m6t_cv"; }
  std::string description() const override {
    return "Expert-load c_v per layer during training, with/without aux loss, dropped tokens at capacity 1.25/2.0 (M6-T Fig. 1).";
  }
  void add_options(CLI::App& app) override {
    add_whole(app, "--layers", layers_opt_, 1, 1024, "MoE layers in the stack (default: by scale)");
    add_whole(app, "--steps", steps_opt_, 1, 1 << 24, "Training steps (default: by scale)");
    add_whole(app, "--tokens", tokens_opt_, 1, 1 << 30, "Tokens per step (default: by scale)");
    add_whole(app, "--experts", experts_opt_, 1, 1 << 20, "Experts per layer (default: by scale)");
    add_real(app, "--lr", lr_opt_, above(0), "Learning rate (default 2.0)");
    add_real(app, "--aux-coef", aux_coef_opt_, at_least(0), "Aux-loss coefficient when on (default 0.01)");
    add_reals(app, "--capacity-factors", gammas_, above(0), "Capacity factors to run (default 1.25,2.0)");
    add_whole(app, "--clusters", clusters_opt_, 1, 100000, "Gaussian clusters in the token distribution (default 64)");
    add_real(app, "--zipf", zipf_opt_, at_least(0), "Zipf exponent of the cluster frequencies (default 1.1)");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "m6t.cv trains one stack on one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    switch (ctx.scale()) {
      case Scale::tiny: defaults(2, 4, 128, 8); hidden_ = 32; break;
      case Scale::local: defaults(4, 150, 512, 16); hidden_ = 64; break;
      // M6-T Table 3, 3-layer model: h 128, f 512, 4096 experts.
      case Scale::paper: defaults(3, 500, 32768, 4096); hidden_ = 128; break;
    }
    lr_ = lr_opt_.value_or(2.0);
    aux_coef_ = aux_coef_opt_.value_or(0.01);
    clusters_ = clusters_opt_.value_or(64);
    zipf_ = zipf_opt_.value_or(1.1);
    if (gammas_.empty()) gammas_ = {1.25, 2.0};
    MoEConfig c = config(gammas_[0], true, ctx.dtype());
    return c.validate(tokens_, 1);
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/m6t", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (double g : gammas_)
      for (bool aux : {true, false}) {
        const std::string name = "m6t_cv/gamma" + fmt(g) + (aux ? "/aux" : "/no_aux");
        // One training run each: the result is a trajectory, not a timing, so it is not repeated.
        ctx.add(name, 1, [this, &ctx, g, aux](benchmark::State& st) { run(st, ctx, Run{g, aux}); },
                benchmark::kMillisecond, 1);
      }
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>&) override {
    if (ctx.rt.rank() != 0) return 0;
    CsvTable t({"capacity_factor", "aux_loss_on", "step", "layer", "cv", "cv_routed", "dropped_fraction", "aux_loss",
                "task_loss", "tokens", "experts", "hidden", "clusters", "zipf", "lr"});
    for (const Row& r : rows_)
      t.add_row({fmt(r.gamma), r.aux ? "1" : "0", std::to_string(r.step), std::to_string(r.layer), fmt(r.cv), fmt(r.cv_routed),
                 fmt(r.dropped), fmt(r.aux_loss), fmt(r.task_loss), std::to_string(tokens_), std::to_string(experts_),
                 std::to_string(hidden_), std::to_string(clusters_), fmt(zipf_), fmt(lr_)});
    t.write(ctx.opts.out_dir + "/m6t/cv.csv", ctx.provenance);
    std::printf("%-8s %-6s %s\n", "gamma", "aux", "c_v per layer at the last step (dropped fraction)");
    for (double g : gammas_)
      for (bool aux : {true, false}) {
        std::printf("%-8.2f %-6s", g, aux ? "on" : "off");
        for (const Row& r : rows_)
          if (r.gamma == g && r.aux == aux && r.step == steps_ - 1) std::printf(" %.3f (%.3f)", r.cv, r.dropped);
        std::printf("\n");
      }
    return 0;
  }

 private:
  MoEConfig config(double gamma, bool aux, DType t) const {
    MoEConfig c;
    c.hidden = hidden_; c.ffn = 4 * hidden_; c.experts = experts_; c.top_k = 1;
    c.capacity_factor = gamma;
    c.aux_loss = aux;
    c.aux_coef = float(aux_coef_);
    c.dtype = t;
    return c;
  }

  // Step s's tokens: cluster k with probability ~ 1/(k+1)^zipf, centre N(0, 1), spread 0.3.
  std::vector<float> sample(int step) const {
    std::vector<double> cdf(clusters_);
    double acc = 0;
    for (int k = 0; k < clusters_; ++k) cdf[k] = (acc += 1.0 / std::pow(k + 1.0, zipf_));
    const auto centres = normal_vector(std::size_t(clusters_) * hidden_, 99, 500, 1.f);
    const auto u = normal_vector(std::size_t(tokens_), 99, 1000 + step, 1.f);
    std::vector<float> x = normal_vector(std::size_t(tokens_) * hidden_, 99, 2000000 + step, 0.3f);
    for (int t = 0; t < tokens_; ++t) {
      const double p = 0.5 * std::erfc(-u[t] / std::sqrt(2.0)) * acc;  // normal -> uniform -> cluster
      const int k = std::min(int(std::lower_bound(cdf.begin(), cdf.end(), p) - cdf.begin()), clusters_ - 1);
      for (int i = 0; i < hidden_; ++i) x[std::size_t(t) * hidden_ + i] += centres[std::size_t(k) * hidden_ + i];
    }
    return x;
  }

  void run(benchmark::State& st, BenchContext& ctx, Run run) {
    const MoEConfig c = config(run.gamma, run.aux, ctx.dtype());
    const int T = tokens_, h = hidden_;
    const std::size_t n = std::size_t(T) * h, es = dtype_size(c.dtype);
    Device& dev = ctx.device;
    const Exec ex = dev.exec(dev.default_stream());
    std::vector<std::unique_ptr<MoELayer>> layers;
    std::vector<Buffer> xs, ys;
    for (int l = 0; l < layers_; ++l) {
      layers.push_back(std::make_unique<MoELayer>(c, dev, ctx.alloc, make_local_dispatcher(DispatcherEnv{c, dev, ctx.alloc})));
      layers.back()->init(1000 + l);
    }
    for (int l = 0; l <= layers_; ++l) xs.push_back(ctx.alloc.allocate(n * es, MemTag::activations));
    Buffer y = ctx.alloc.allocate(n * es, MemTag::activations), dxl = ctx.alloc.allocate(n * es, MemTag::activations);
    Buffer grad = ctx.alloc.allocate(n * es, MemTag::activations);
    const auto teacher = normal_vector(std::size_t(h) * h, 7, 7, 1.f / std::sqrt(float(h)));
    Event a(ctx.backend()), b(ctx.backend());
    double step_ms = 0;
    for (auto _ : st) {
      for (int step = 0; step < steps_; ++step) {
        const auto x0 = sample(step);
        a.record(dev.default_stream());
        Buffer in = device_from_f32(dev, ctx.alloc, x0, c.dtype, MemTag::temporary);
        dev.copy(xs[0].data(), in.data(), n * es, dev.default_stream());
        for (int l = 0; l < layers_; ++l) {
          layers[l]->forward(xs[l].data(), T, y.data());
          dev.copy(xs[l + 1].data(), xs[l].data(), n * es, dev.default_stream());
          axpy(ex, n, 1.f, y.data(), xs[l + 1].data(), c.dtype);  // residual
        }
        // task loss: mean over elements of 0.5 (x_L - x0 R)^2 (order 1, as a language-model loss), and its gradient
        const auto out = host_f32(dev, ctx.alloc, xs[layers_].data(), n, c.dtype);
        std::vector<float> target(n), g(n);
        gemm_cpu(dense_gemm(false, false, T, h, h, x0.data(), teacher.data(), target.data()));
        double task = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double d = double(out[i]) - target[i];
          task += 0.5 * d * d / double(n);
          g[i] = float(d / double(n));
        }
        Buffer gd = device_from_f32(dev, ctx.alloc, g, c.dtype, MemTag::temporary);
        dev.copy(grad.data(), gd.data(), n * es, dev.default_stream());
        for (int l = layers_ - 1; l >= 0; --l) {
          layers[l]->backward(grad.data(), dxl.data());
          axpy(ex, n, 1.f, dxl.data(), grad.data(), c.dtype);  // through the residual
        }
        for (int l = 0; l < layers_; ++l) {
          MoELayer& L = *layers[l];
          const LoadStats s = L.load();
          rows_.push_back(Row{run.gamma, run.aux, step, l, s.cv, coefficient_of_variation(s.routed), s.dropped_fraction,
                              L.routing().aux_loss, task});
          axpy(ex, std::size_t(h) * c.experts, -float(lr_), L.gate().grad().data(), L.gate().weight().data(), DType::f32);
          const std::size_t w = std::size_t(c.experts) * h * c.ffn;
          axpy(ex, w, -float(lr_), L.experts().w1_grad().data(), L.experts().w1().data(), c.dtype);
          axpy(ex, w, -float(lr_), L.experts().w2_grad().data(), L.experts().w2().data(), c.dtype);
        }
        b.record(dev.default_stream());
        dev.synchronize();
        step_ms += Event::elapsed_ms(a, b);
      }
      ctx.set_iteration_time(st, step_ms);
    }
    st.counters["ms_per_step"] = step_ms / steps_;
  }

  void defaults(int layers, int steps, int tokens, int experts) {
    layers_ = layers_opt_.value_or(layers);
    steps_ = steps_opt_.value_or(steps);
    tokens_ = tokens_opt_.value_or(tokens);
    experts_ = experts_opt_.value_or(experts);
  }

  std::optional<int> layers_opt_, steps_opt_, tokens_opt_, experts_opt_, clusters_opt_;
  std::optional<double> lr_opt_, aux_coef_opt_, zipf_opt_;
  int layers_ = 1, steps_ = 1, tokens_ = 1, experts_ = 1, hidden_ = 64, clusters_ = 64;
  double lr_ = 2.0, aux_coef_ = 0.01, zipf_ = 1.1;
  std::vector<double> gammas_;
  std::vector<Row> rows_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::CvBench>(argc, argv); }
