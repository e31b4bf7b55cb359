// The runs of moebench_m6t_cv and what it writes from them: the settings of the sweep (the default
// and one change at a time), each run's trajectory of c_v per layer and step, and m6t/cv.csv
// with m6t/cv_sweep.csv.
#pragma once
#include <string>
#include <vector>
#include "harness/bench.h"

namespace moebench {

// What the stack is trained with and on.
struct Setting {
  std::string name, optimizer;
  double lr, weight_decay, aux_coef, zipf, spread;
  std::string changed;  // what differs from the default, in words
};

struct Row {
  int step, layer;
  double cv, cv_routed, dropped, aux_loss, task_loss;
  double top_prob, gate_rms;  // mean probability of each token's first choice; RMS of the gate weights
};

// One training run: a setting, a capacity factor, the aux loss on or off.
struct Trajectory {
  Setting setting;
  double gamma;
  bool aux;
  std::vector<Row> rows;
};

struct CvRecord {
  int layers = 1, steps = 1, tokens = 1, experts = 1, hidden = 64, clusters = 64;
  std::vector<double> gammas;  // capacity factors
  std::vector<Trajectory> main_runs, sweep_runs;
};

// The default and one change at a time, each a candidate cause of c_v rising with the aux loss.
std::vector<Setting> cv_sweep_settings(const Setting& d);

// m6t/cv.csv, and m6t/cv_sweep.csv when the sweep ran; the console's summary of both.
void write_cv_csvs(const BenchContext& ctx, const CvRecord& rec);

}  // namespace moebench
