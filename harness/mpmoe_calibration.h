// The performance model's inputs for one layer on this machine and link (MPMoE Sec. 4.2),
// measured with the layer's own operations, and the model's choice of (n, S):
//  - speed fits (Fig. 9): piecewise-linear time over volume of the dispatch all-to-all (comm,
//    bytes a rank sends), the experts' forward, backward and first GEMM alone (comp, rows a
//    rank computes) and a device-to-pinned-host copy (mem, bytes);
//  - slowdown factors alpha(y, x) (Fig. 3) of those three beside each other at one part's size
//    (B / 4 rows);
//  - the layer's work outside the pipeline (gating, local permutations, the gate's all-reduce),
//    from a run with n = 1.
// Every time is the slowest rank's, so every rank fits the same functions and picks the same
// configuration.
#pragma once
#include <map>
#include <string>
#include <vector>
#include "harness/layer_runner.h"
#include "models/mpmoe_perf_model.h"
#include "models/piecewise_linear.h"

namespace moebench {

struct SpeedSample {
  std::string op;  // comm, comp_fwd, comp_bwd, comp_middle, mem
  double volume = 0;  // bytes or rows
  double ms = 0;
};

// What a slowdown factor alpha(y, x) = alone / beside rests on: y's time alone and beside x,
// each a median with its fastest and slowest run, and so the factor's range over those runs.
struct SlowdownTimes {
  double alone_ms = 0, alone_min = 0, alone_max = 0;
  double beside_ms = 0, beside_min = 0, beside_max = 0;
  double alpha_min() const { return alone_min / beside_max; }
  double alpha_max() const { return alone_max / beside_min; }
};

struct Calibration {
  std::map<std::string, PiecewiseLinear> fits;  // by op
  std::vector<SpeedSample> samples;
  Slowdowns alpha;
  std::map<std::pair<std::string, std::string>, SlowdownTimes> alpha_ms;  // by (y, x)
  double other_ms = 0;        // per iteration, outside S, C, R and M
  double calibration_ms = 0;  // wall time the calibration took (the model's overhead)
  double time(const std::string& op, double volume) const;
};

// Collective.
Calibration calibrate(LayerRunner& runner, int repeats);

// One part's operations alone for layer `cfg` at `tokens` per rank split in n, under `reuse`
// (rows a part computes and sends taken as balanced: k B / n).
PartTimes part_times(const Calibration& cal, const MoEConfig& cfg, int tokens, int n, MemoryReuse reuse);

struct ModelPrediction {
  int n = 1;
  MemoryReuse reuse = MemoryReuse::none;
  PassPrediction forward, backward;
  double total_ms = 0;  // forward + backward + other
  double busy_ms(const std::string& kind) const;
};
ModelPrediction predict(const Calibration& cal, const MoEConfig& cfg, int tokens, int n, MemoryReuse reuse);
// MPMoE-pm: the best predicted (n, S) over n in [n_min, min(n_max, tokens)] and `strategies`.
ModelPrediction choose(const Calibration& cal, const MoEConfig& cfg, int tokens, int n_min, int n_max,
                       const std::vector<MemoryReuse>& strategies);

}  // namespace moebench
