// moebench_m6t_cv (m6t.cv, M6-T Fig. 1 and Sec. 3.1): the load-balance coefficient of
// variation c_v = sigma/mu of the tokens each expert computes, per layer, while a stack of
// MoE layers trains, with and without the auxiliary loss, and the share of tokens dropped at
// capacity factors 1.25 and 2.0 (Eq. 2).
// Synthetic data: tokens from a mixture of Gaussian clusters whose frequencies follow a Zipf
// law (cluster k has weight 1/(k+1)^s), so routing starts out unbalanced, as real text does.
// Task: regress a fixed random linear map of the input through residual MoE layers
// x_{l+1} = x_l + MoE_l(x_l) (mean squared error), by AdamW as M6-T trains (default lr 3e-3
// for a run of hundreds of steps) or by plain SGD.
// The sweep (--sweep) reruns the stack under the settings that explain the result, one change
// at a time. What decides it is the optimizer: under plain SGD (lr 2 or 0.5; Zipf or uniform
// clusters; tight or wide ones) c_v climbs back up even with the aux loss, because each step
// applies the router's task gradient -- noisy from batch to batch and growing as the experts
// fit -- at full size, against a small, steady aux gradient; AdamW's per-coordinate
// normalisation lets the steady aux signal accumulate in its first moment while the noise
// averages out, and c_v settles near the paper's plateau (lr 3e-3 or 1e-3, Zipf or uniform); a
// 10x aux coefficient also holds SGD down. Writes <out>/m6t/cv.csv (and cv_sweep.csv).
#include <cmath>
#include <cstdio>
#include "runtime/host_copy.h"
#include "bench/m6t_cv_runs.h"
#include "harness/bench.h"
#include "runtime/adamw.h"
#include "kernels/axpy.h"
#include "kernels/convert.h"
#include "kernels/gemm.h"
#include "moe/init.h"
#include "moe/moe_layer.h"
#include "models/paper_specs.h"
#include "models/paper_values.h"

namespace moebench {
namespace {

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
    add_choice(app, "--optimizer", optimizer_, {"adamw", "sgd"}, "Optimizer (default adamw, as M6-T)");
    add_real(app, "--lr", lr_opt_, above(0), "Learning rate (default: 3e-3 with adamw, 2.0 with sgd)");
    add_real(app, "--weight-decay", weight_decay_opt_, at_least(0), "AdamW weight decay (default 0.01)");
    add_real(app, "--aux-coef", aux_coef_opt_, at_least(0), "Aux-loss coefficient when on (default 0.01)");
    add_reals(app, "--capacity-factors", rec_.gammas, above(0), "Capacity factors to run (default 1.25,2.0)");
    add_whole(app, "--clusters", clusters_opt_, 1, 100000, "Gaussian clusters in the token distribution (default 64)");
    add_real(app, "--zipf", zipf_opt_, at_least(0), "Zipf exponent of the cluster frequencies (default 1.1)");
    add_real(app, "--cluster-spread", spread_opt_, above(0), "Standard deviation of a token around its cluster centre (default 0.3)");
    add_flag(app, "--sweep", sweep_,
             "Also train under the settings that explain the result (optimizer, step size, aux strength, data), "
             "at the first capacity factor, into cv_sweep.csv");
  }

  std::optional<std::string> validate(const BenchContext& ctx) override {
    if (ctx.world.size() != 1)
      return "m6t.cv trains one stack on one device, so it runs on one rank; got " + std::to_string(ctx.world.size()) +
             " (launch it with 1 rank: --ranks 1)";
    switch (ctx.scale()) {
      case Scale::tiny: defaults(2, 4, 128, 8); rec_.hidden = 32; break;
      case Scale::local: defaults(4, 300, 512, 16); rec_.hidden = 64; break;
      case Scale::paper: {  // M6-T Table 3's 3-layer model (h 128, f 512 = 4h, 4096 experts)
        const ModelSpec& m = model_spec("m6t-3layer");
        defaults(m.shape.layers, 500, 32768, m.shape.experts);
        rec_.hidden = m.shape.hidden;
        break;
      }
    }
    if (optimizer_ == "sgd" && weight_decay_opt_) return "--weight-decay: only --optimizer adamw uses it";
    rec_.clusters = clusters_opt_.value_or(64);
    main_ = Setting{"default", optimizer_, lr_opt_.value_or(optimizer_ == "adamw" ? 3e-3 : 2.0),
                    optimizer_ == "adamw" ? weight_decay_opt_.value_or(0.01) : 0.0, aux_coef_opt_.value_or(0.01),
                    zipf_opt_.value_or(1.1), spread_opt_.value_or(0.3), "as given"};
    if (rec_.gammas.empty()) rec_.gammas = {1.25, 2.0};
    MoEConfig c = config(rec_.gammas[0], true, main_.aux_coef, ctx.dtype());
    return c.validate(rec_.tokens, 1);
  }

  std::vector<OutputFolder> output_folders(const BenchContext& ctx) const override {
    return {{"--out", ctx.opts.out_dir + "/m6t", false}};
  }

  void register_benchmarks(BenchContext& ctx) override {
    for (double g : rec_.gammas)
      for (bool aux : {true, false}) add_run(ctx, "m6t_cv/gamma" + fmt(g) + (aux ? "/aux" : "/no_aux"), main_, g, aux, false);
    if (!sweep_) return;
    for (const Setting& s : cv_sweep_settings(main_))
      for (bool aux : {true, false})
        add_run(ctx, "m6t_cv/sweep/" + s.name + (aux ? "/aux" : "/no_aux"), s, rec_.gammas[0], aux, true);
  }

  int finish(BenchContext& ctx, const std::vector<RunRecord>&) override {
    if (ctx.rt.rank() == 0) write_cv_csvs(ctx, rec_);
    return 0;
  }

 private:
  void add_run(BenchContext& ctx, const std::string& name, const Setting& s, double gamma, bool aux, bool sweep) {
    // One training run each: the result is a trajectory, not a timing, so it is not repeated.
    ctx.add(name, 1, [this, &ctx, s, gamma, aux, sweep](benchmark::State& st) {
      Trajectory tr{s, gamma, aux, {}};
      train(st, ctx, tr);
      (sweep ? rec_.sweep_runs : rec_.main_runs).push_back(std::move(tr));
    }, benchmark::kMillisecond, 1);
  }

  MoEConfig config(double gamma, bool aux, double aux_coef, DType t) const {
    MoEConfig c;
    c.hidden = rec_.hidden; c.ffn = 4 * rec_.hidden; c.experts = rec_.experts; c.top_k = 1;
    c.capacity_factor = gamma;
    c.aux_loss = aux;
    c.aux_coef = float(aux_coef);
    c.dtype = t;
    return c;
  }

  // How sure the router is: the mean over tokens of the probability of the first choice.
  double mean_top_prob(BenchContext& ctx, const MoEContext& mb, int k) const {
    const Routing& r = mb.routing;
    const int S = r.slots();
    const auto w = host_f32(ctx.device, ctx.alloc, r.weight.data(), std::size_t(r.tokens()) * S, DType::f32);
    double sum = 0;
    for (std::size_t i = 0; i < w.size(); i += std::size_t(k)) sum += w[i];  // slot z*k: prototype z's first choice
    return sum / double(w.size() / std::size_t(k));
  }

  double gate_rms(BenchContext& ctx, MoELayer& L) const {
    const std::size_t n = std::size_t(L.config().hidden) * L.config().experts;
    const auto w = host_f32(ctx.device, ctx.alloc, L.gate().weight().data(), n, DType::f32);
    double sq = 0;
    for (float v : w) sq += double(v) * v;
    return std::sqrt(sq / double(n));
  }

  // AdamW's state for the layer's gate (fp32), then its experts' w1 and w2 (the layer's dtype).
  std::unique_ptr<AdamW> adam_state(BenchContext& ctx, const Setting& set, MoELayer& L) {
    AdamStep hyper;
    hyper.lr = float(set.lr);
    hyper.weight_decay = float(set.weight_decay);
    auto adam = std::make_unique<AdamW>(hyper, ctx.device, ctx.alloc);
    const DType t = L.config().dtype;
    for (auto [weight, dtype] : {std::pair{&L.gate().weight(), DType::f32}, std::pair{&L.experts().w1(), t},
                                 std::pair{&L.experts().w2(), t}})
      adam->add(weight->data(), weight->bytes() / dtype_size(dtype), dtype, ctx.device.default_stream());
    return adam;
  }

  // One optimizer step on the layer's gate and experts from the gradients of the last backward.
  void update(BenchContext& ctx, const Setting& s, MoELayer& L, AdamW* adam) {
    const MoEConfig& c = L.config();
    const Exec ex = ctx.device.exec(ctx.device.default_stream());
    const std::size_t g = std::size_t(c.hidden) * c.experts, w = std::size_t(c.experts) * c.hidden * c.ffn;
    if (s.optimizer == "sgd") {
      axpy(ex, g, -float(s.lr), L.gate().grad().data(), L.gate().weight().data(), DType::f32);
      axpy(ex, w, -float(s.lr), L.experts().w1_grad().data(), L.experts().w1().data(), c.dtype);
      axpy(ex, w, -float(s.lr), L.experts().w2_grad().data(), L.experts().w2().data(), c.dtype);
      return;
    }
    const Stream& st = ctx.device.default_stream();
    adam->next_step(st);
    adam->update(0, L.gate().grad().data(), st);
    adam->update(1, L.experts().w1_grad().data(), st);
    adam->update(2, L.experts().w2_grad().data(), st);
  }

  // Step s's tokens: cluster k with probability ~ 1/(k+1)^zipf, centre N(0, 1), spread as set.
  std::vector<float> sample(const Setting& set, int step) const {
    std::vector<double> cdf(rec_.clusters);
    double acc = 0;
    for (int k = 0; k < rec_.clusters; ++k) cdf[k] = (acc += 1.0 / std::pow(k + 1.0, set.zipf));
    const auto centres = normal_vector(std::size_t(rec_.clusters) * rec_.hidden, 99, 500, 1.f);
    const auto u = normal_vector(std::size_t(rec_.tokens), 99, 1000 + step, 1.f);
    std::vector<float> x = normal_vector(std::size_t(rec_.tokens) * rec_.hidden, 99, 2000000 + step, float(set.spread));
    for (int t = 0; t < rec_.tokens; ++t) {
      const double p = 0.5 * std::erfc(-u[t] / std::sqrt(2.0)) * acc;  // normal -> uniform -> cluster
      const int k = std::min(int(std::lower_bound(cdf.begin(), cdf.end(), p) - cdf.begin()), rec_.clusters - 1);
      for (int i = 0; i < rec_.hidden; ++i) x[std::size_t(t) * rec_.hidden + i] += centres[std::size_t(k) * rec_.hidden + i];
    }
    return x;
  }

  void train(benchmark::State& st, BenchContext& ctx, Trajectory& tr) {
    const Setting& set = tr.setting;
    const MoEConfig c = config(tr.gamma, tr.aux, set.aux_coef, ctx.dtype());
    const int T = rec_.tokens, h = rec_.hidden;
    const std::size_t n = std::size_t(T) * h, es = dtype_size(c.dtype);
    Device& dev = ctx.device;
    const Exec ex = dev.exec(dev.default_stream());
    std::vector<std::unique_ptr<MoELayer>> layers;
    std::vector<Buffer> xs;
    std::vector<std::unique_ptr<AdamW>> opt(rec_.layers);
    const Stream& s = dev.default_stream();
    for (int l = 0; l < rec_.layers; ++l) {
      layers.push_back(std::make_unique<MoELayer>(c, dev, ctx.alloc, make_local_dispatcher(DispatcherEnv{c, dev, ctx.alloc})));
      layers.back()->init(1000 + l, s);
      if (set.optimizer == "adamw") opt[l] = adam_state(ctx, set, *layers.back());
    }
    for (int l = 0; l <= rec_.layers; ++l) xs.push_back(ctx.alloc.allocate(n * es, MemTag::activations));
    Buffer y = ctx.alloc.allocate(n * es, MemTag::activations), dxl = ctx.alloc.allocate(n * es, MemTag::activations);
    Buffer grad = ctx.alloc.allocate(n * es, MemTag::activations);
    const auto teacher = normal_vector(std::size_t(h) * h, 7, 7, 1.f / std::sqrt(float(h)));
    double step_ms = 0;
    for (auto _ : st) {
      for (int step = 0; step < rec_.steps; ++step) step_ms += ctx.time_ms(s, [&] {
        const auto x0 = sample(set, step);
        Buffer in = device_from_f32(dev, ctx.alloc, x0, c.dtype, MemTag::temporary);
        dev.copy(xs[0].data(), in.data(), n * es, s);
        std::vector<MoEContext> mbs;
        for (int l = 0; l < rec_.layers; ++l) {
          mbs.push_back(layers[l]->forward(xs[l].data(), T, y.data(), s));
          dev.copy(xs[l + 1].data(), xs[l].data(), n * es, s);
          axpy(ex, n, 1.f, y.data(), xs[l + 1].data(), c.dtype);  // residual
        }
        // task loss: mean over elements of 0.5 (x_L - x0 R)^2 (order 1, as a language-model loss), and its gradient
        const auto out = host_f32(dev, ctx.alloc, xs[rec_.layers].data(), n, c.dtype);
        std::vector<float> target(n), g(n);
        gemm_cpu(dense_gemm(false, false, T, h, h, x0.data(), teacher.data(), target.data()));
        double task = 0;
        for (std::size_t i = 0; i < n; ++i) {
          const double d = double(out[i]) - target[i];
          task += 0.5 * d * d / double(n);
          g[i] = float(d / double(n));
        }
        if (!std::isfinite(task))
          throw Error("m6t.cv: training diverged at step " + std::to_string(step) + " (" + set.optimizer + " lr " +
                      fmt(set.lr) + ", capacity " + fmt(tr.gamma) + ", aux " + (tr.aux ? "on" : "off") + ": task loss " +
                      (std::isnan(task) ? "NaN" : "infinite") + "); lower --lr");
        Buffer gd = device_from_f32(dev, ctx.alloc, g, c.dtype, MemTag::temporary);
        dev.copy(grad.data(), gd.data(), n * es, s);
        for (int l = rec_.layers - 1; l >= 0; --l) {
          layers[l]->zero_grad(s);
          layers[l]->backward(mbs[l], grad.data(), dxl.data(), s);
          axpy(ex, n, 1.f, dxl.data(), grad.data(), c.dtype);  // through the residual
        }
        for (int l = 0; l < rec_.layers; ++l) {
          MoELayer& L = *layers[l];
          L.read_counts(mbs[l], s);  // the aux loss, on the device since the forward
          const LoadStats load = L.load(mbs[l]);
          tr.rows.push_back(Row{step, l, load.cv, coefficient_of_variation(load.routed), load.dropped_fraction,
                                mbs[l].routing.aux_loss(), task, mean_top_prob(ctx, mbs[l], c.top_k), gate_rms(ctx, L)});
          update(ctx, set, L, opt[l].get());
        }
      });
      st.SetIterationTime(step_ms / 1e3);  // the whole training run: one iteration
    }
  }

  void defaults(int layers, int steps, int tokens, int experts) {
    rec_.layers = layers_opt_.value_or(layers);
    rec_.steps = steps_opt_.value_or(steps);
    rec_.tokens = tokens_opt_.value_or(tokens);
    rec_.experts = experts_opt_.value_or(experts);
  }

  std::optional<int> layers_opt_, steps_opt_, tokens_opt_, experts_opt_, clusters_opt_;
  std::optional<double> lr_opt_, aux_coef_opt_, zipf_opt_, weight_decay_opt_, spread_opt_;
  std::string optimizer_ = "adamw";
  bool sweep_ = false;
  Setting main_;
  CvRecord rec_;
};

}  // namespace
}  // namespace moebench

int main(int argc, char** argv) { return moebench::bench_main<moebench::CvBench>(argc, argv); }
