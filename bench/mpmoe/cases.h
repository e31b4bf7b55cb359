// moebench_mpmoe's record of what it measured for one layer shape and batch (a case), the
// configurations it names, and the helpers its figure writers read the records with.
#pragma once
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>
#include "harness/bench.h"
#include "harness/csv.h"
#include "harness/layer_runner.h"
#include "harness/mpmoe_calibration.h"
#include "harness/spread.h"

namespace moebench::mpmoe {

inline const std::vector<std::string> kFigures = {"f2", "f3", "f9", "f10", "f11", "f12", "f13", "f14", "f15", "f16", "f17"};
inline const std::vector<MemoryReuse> kStrategies = {MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4};
inline constexpr double kIdealTarget = 0.90, kSavingTarget = 0.98, kPmTarget = 1.03, kPhaseErrorGoal = 0.10;

inline std::string config_key(const PipelineConfig& p, bool sequential) {
  return (sequential ? "seq " : "") + p.describe();
}
inline PipelineConfig tokens_split(int n, MemoryReuse s = MemoryReuse::none) {
  PipelineConfig p;
  p.partitions = n;
  p.reuse = s;
  return p;
}
inline PipelineConfig groups_split(int g) {
  PipelineConfig p;
  p.split = PipelineSplit::worker_groups;
  p.group_size = g;
  return p;
}

// Everything measured for one layer shape and batch.
struct CaseResult {
  std::string model;
  int tokens = 0;
  MoEConfig cfg;
  std::map<std::string, RunResult> runs;  // by config_key
  std::map<std::string, PipelineConfig> configs;
  std::optional<Calibration> cal;
  // MPMoE-pb
  std::map<MemoryReuse, int> pb_n;          // Algorithm 1's n per strategy
  std::map<MemoryReuse, double> pb_ms;      // its time at that n, as the search compared them
  PipelineConfig pb;
  double pb_search_ms = 0;
  int pb_points = 0;
  bool pb_saved = false;
  int f14_pick = 0;                         // Algorithm 1 over PMoE's measured times
  std::map<std::string, double> f12_worst, f12_theory;  // by config: the worst rank's achieved / Eq. 5; largest Eq. 5
  // MPMoE-pm
  std::optional<ModelPrediction> pm;
  // f2
  std::optional<RunResult> memory;
  std::optional<RunResult> no_tensor_cores;  // f16's first bar: seq(n = 1) with tensor cores off (cuda)
  std::map<std::string, double> explained;  // rank 0's activations, tensor by tensor
  std::map<std::string, double> explained_temporary, explained_buffers;  // ... its temporaries and comm buffers
  double rank0_activations = 0;
};

// The configurations of a case that its figures compare with each other (f10, f13, f15, f16):
// measured after everything else, round by round (LayerRunner::run_paired), so that iteration r
// of one and iteration r of another shared the machine's moment; their results replace any
// earlier run of the same configuration, and their CSVs give each round (<column>_reps).
class PairedRounds {
 public:
  // Adds `p` (once) and names it in c.configs.
  void add(CaseResult& c, const PipelineConfig& p, bool sequential = false);
  // Collective: `rounds` rounds, after `warmup` iterations of each configuration `c` has not run.
  void run(CaseResult& c, LayerRunner& r, int warmup, int rounds);

 private:
  std::vector<PairedConfig> configs_;
};

// A new case of `shape` at batch B, at the end of `list`.
inline CaseResult& new_case(std::vector<CaseResult>& list, const LayerShape& shape, int B) {
  CaseResult& c = list.emplace_back();
  c.model = shape.model;
  c.tokens = B;
  c.cfg = shape.moe;
  return c;
}

// A case's run of `p`, or nullptr where it was not run.
inline const RunResult* find(const CaseResult& c, const PipelineConfig& p, bool sequential = false) {
  auto it = c.runs.find(config_key(p, sequential));
  return it == c.runs.end() ? nullptr : &it->second;
}
inline double min_of(const RunResult& r) { return *std::min_element(r.ms.begin(), r.ms.end()); }
inline double max_of(const RunResult& r) { return *std::max_element(r.ms.begin(), r.ms.end()); }
// Median, min and max, as CSV fields.
inline std::vector<std::string> timing(const RunResult& r) { return {fmt(r.median_ms()), fmt(min_of(r)), fmt(max_of(r))}; }
// Each iteration's ms in the order it ran ("-" for fewer than two).
inline std::string reps_cell(const RunResult& r) { return repetitions_cell(r.ms); }
// a / b per round, where both ran as many iterations (paired rounds); else nothing.
inline std::vector<double> paired_ratios(const RunResult& a, const RunResult& b) {
  std::vector<double> q;
  for (std::size_t i = 0; i < a.ms.size() && a.ms.size() == b.ms.size(); ++i) q.push_back(a.ms[i] / b.ms[i]);
  return q;
}
// a / b: the median of paired_ratios, else of the medians.
inline double paired_ratio(const RunResult& a, const RunResult& b) {
  const std::vector<double> q = paired_ratios(a, b);
  return q.empty() ? a.median_ms() / b.median_ms() : median_interval(q).median;
}
inline void append(std::vector<std::string>& row, const std::vector<std::string>& more) {
  row.insert(row.end(), more.begin(), more.end());
}

// The layer of `model` (a Table 3 name, or "tiny"): its sizes, with `experts`, `top_k`, `dtype`
// and the aux loss on.
LayerShape layer_shape(const std::string& model, int experts, int top_k, DType dtype);

// What a run holds at once: the timed figures' layers at their batches, f2's (empty: no f2),
// whether S1-S3 offload to pinned host memory, and --experiments layer's strategy.
struct MemoryPlan {
  const std::vector<LayerShape>& shapes;
  const std::vector<int>& tokens;
  const std::vector<LayerShape>& memory_shapes;
  const std::vector<int>& memory_tokens;
  bool offloads = false;
  std::optional<MemoryReuse> layer_strategy;
};

// Why the plan does not fit this rank's device or pinned host memory, naming the option; or nullopt.
std::optional<std::string> check_memory(const BenchContext& ctx, const MemoryPlan& plan);

// This rank's activations at the end of forward (their peak with n = 1), tensor by tensor,
// from the shapes and the step's routed counts: what Eq. 2 counts, and what it leaves out.
void explain(CaseResult& c, LayerRunner& r);

}  // namespace moebench::mpmoe
