#include "bench/m6t_cv_runs.h"
#include <algorithm>
#include <cstdio>
#include "models/paper_values.h"

namespace moebench {

// The default and one change at a time, each a candidate cause of c_v rising with the aux loss.
std::vector<Setting> cv_sweep_settings(const Setting& d) {
  auto with = [&](std::string name, std::string changed) {
    Setting s = d;
    s.name = std::move(name);
    s.changed = std::move(changed);
    return s;
  };
  std::vector<Setting> out;
  out.push_back(with("default", "none: AdamW lr 3e-3, aux 0.01, Zipf 1.1, spread 0.3"));
  Setting s = with("sgd_lr2", "plain SGD at lr 2 (the earlier setting)");
  s.optimizer = "sgd"; s.lr = 2.0; s.weight_decay = 0;
  out.push_back(s);
  s = with("sgd_lr0.5", "plain SGD at lr 0.5 (smaller steps)");
  s.optimizer = "sgd"; s.lr = 0.5; s.weight_decay = 0;
  out.push_back(s);
  s = with("sgd_lr2_aux0.1", "plain SGD at lr 2 with a 10x aux coefficient");
  s.optimizer = "sgd"; s.lr = 2.0; s.weight_decay = 0; s.aux_coef = 0.1;
  out.push_back(s);
  s = with("sgd_lr2_uniform_clusters", "plain SGD at lr 2, clusters equally frequent (Zipf 0)");
  s.optimizer = "sgd"; s.lr = 2.0; s.weight_decay = 0; s.zipf = 0.0;
  out.push_back(s);
  s = with("sgd_lr2_wide_clusters", "plain SGD at lr 2, cluster spread 1.0");
  s.optimizer = "sgd"; s.lr = 2.0; s.weight_decay = 0; s.spread = 1.0;
  out.push_back(s);
  s = with("adamw_lr1e-3", "AdamW at lr 1e-3 (smaller steps)");
  s.lr = 1e-3;
  out.push_back(s);
  s = with("adamw_uniform_clusters", "AdamW, clusters equally frequent (Zipf 0)");
  s.zipf = 0.0;
  out.push_back(s);
  return out;
}

namespace {

// Per run of the sweep: where c_v (mean over layers) starts, how low it gets, where it ends.
void write_sweep(const BenchContext& ctx, const CvRecord& rec) {
  CsvTable t({"setting", "changed", "optimizer", "lr", "aux_coef", "zipf", "cluster_spread", "capacity_factor",
              "aux_loss_on", "steps", "cv_first", "cv_min", "cv_min_step", "cv_last_fifth", "cv_last_max_layer",
              "rise_after_min", "router_top_prob_last", "task_loss_first", "task_loss_last", "dropped_last"});
  std::printf("\nsweep (capacity factor %.2f; c_v is the mean over layers; 'last fifth' = mean over the last 20%% of steps)\n",
              rec.gammas[0]);
  std::printf("%-26s %-4s %8s %8s %10s %8s %10s\n", "setting", "aux", "c_v 0", "c_v min", "last 1/5", "rise", "task loss");
  for (const Trajectory& tr : rec.sweep_runs) {
    std::vector<double> mean(rec.steps, 0.0), last_layers;
    double top = 0, dropped = 0, loss_first = 0, loss_last = 0;
    for (const Row& r : tr.rows) {
      mean[r.step] += r.cv / rec.layers;
      if (r.step == 0) loss_first = r.task_loss;
      if (r.step == rec.steps - 1) {
        last_layers.push_back(r.cv);
        top += r.top_prob / rec.layers;
        dropped += r.dropped / rec.layers;
        loss_last = r.task_loss;
      }
    }
    int min_step = 0;
    for (int s = 1; s < rec.steps; ++s)
      if (mean[s] < mean[min_step]) min_step = s;
    const int tail = std::max(1, rec.steps / 5);
    double last = 0;
    for (int s = rec.steps - tail; s < rec.steps; ++s) last += mean[s] / tail;
    const double last_max = *std::max_element(last_layers.begin(), last_layers.end());
    t.add_row({tr.setting.name, tr.setting.changed, tr.setting.optimizer, fmt(tr.setting.lr), fmt(tr.setting.aux_coef),
               fmt(tr.setting.zipf), fmt(tr.setting.spread), fmt(tr.gamma), tr.aux ? "1" : "0", std::to_string(rec.steps),
               fmt(mean[0]), fmt(mean[min_step]), std::to_string(min_step), fmt(last), fmt(last_max),
               fmt(last - mean[min_step]), fmt(top), fmt(loss_first), fmt(loss_last), fmt(dropped)});
    std::printf("%-26s %-4s %8.3f %8.3f %10.3f %8.3f %5.3f->%.3f\n", tr.setting.name.c_str(), tr.aux ? "on" : "off",
                mean[0], mean[min_step], last, last - mean[min_step], loss_first, loss_last);
  }
  t.write(ctx.opts.out_dir + "/m6t/cv_sweep.csv", ctx.provenance);
}

std::string data_words(const CvRecord& rec, const Setting& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "synthetic: %d Gaussian clusters (centres N(0,1), spread %g), Zipf %g frequencies, "
                "%d-dim tokens; target a fixed random linear map (MSE)", rec.clusters, s.spread, s.zipf, rec.hidden);
  return buf;
}

}  // namespace

void write_cv_csvs(const BenchContext& ctx, const CvRecord& rec) {
  CsvTable t({"capacity_factor", "aux_loss_on", "step", "layer", "cv", "cv_routed", "dropped_fraction", "aux_loss",
              "task_loss", "router_top_prob", "gate_weight_rms", "tokens", "experts", "hidden", "layers", "clusters",
              "zipf", "cluster_spread", "optimizer", "lr", "weight_decay", "aux_coef", "data",
              "paper_cv_with_aux_plateau", "paper_source"});
  for (const Trajectory& tr : rec.main_runs)
    for (const Row& r : tr.rows)
      t.add_row({fmt(tr.gamma), tr.aux ? "1" : "0", std::to_string(r.step), std::to_string(r.layer), fmt(r.cv),
                 fmt(r.cv_routed), fmt(r.dropped), fmt(r.aux_loss), fmt(r.task_loss), fmt(r.top_prob), fmt(r.gate_rms),
                 std::to_string(rec.tokens), std::to_string(rec.experts), std::to_string(rec.hidden), std::to_string(rec.layers),
                 std::to_string(rec.clusters), fmt(tr.setting.zipf), fmt(tr.setting.spread), tr.setting.optimizer,
                 fmt(tr.setting.lr), fmt(tr.setting.weight_decay), fmt(tr.setting.aux_coef), data_words(rec, tr.setting),
                 fmt(paper_number("001.s31.cv_with_aux")), "M6-T Sec. 3.1 and Fig. 1, read off the figure, not a table"});
  t.write(ctx.opts.out_dir + "/m6t/cv.csv", ctx.provenance);
  std::printf("%-8s %-6s %s\n", "gamma", "aux", "c_v per layer at the last step (dropped fraction)");
  for (const Trajectory& tr : rec.main_runs) {
    std::printf("%-8.2f %-6s", tr.gamma, tr.aux ? "on" : "off");
    for (const Row& r : tr.rows)
      if (r.step == rec.steps - 1) std::printf(" %.3f (%.3f)", r.cv, r.dropped);
    std::printf("\n");
  }
  if (!rec.sweep_runs.empty()) write_sweep(ctx, rec);
}

}  // namespace moebench
