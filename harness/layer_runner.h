// What MPMoE's bench (moebench_mpmoe) measures everything with: one pipelined MoE layer of one shape and batch
// on this rank's streams and communicators, run forward + backward under any split and
// strategy (the weights stay; PipelinedMoELayer::set_pipeline), on its four streams or all on
// the compute stream (the paper's seq(n): split but not overlapped). A run reports the slowest
// rank's time per iteration, the breakdown ranges (slowest rank, mean per iteration), and the
// allocator's peaks over its iterations (largest rank).
#pragma once
#include <optional>
#include "runtime/adamw.h"
#include <array>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "moe/pipelined_layer.h"
#include "runtime/timing.h"

namespace moebench {

struct LayerShape {
  std::string model;  // a 003 Table 3 name, or "custom"
  MoEConfig moe;
};

// The breakdown ranges of one operation kind of the performance model: "S", "C", "R", "M".
const std::vector<std::string>& kind_ranges(const std::string& kind);

struct RunResult {
  std::vector<double> ms;                  // per timed iteration
  std::map<std::string, double> range_ms;  // per iteration
  std::map<std::string, std::vector<double>> range_ms_each;  // each timed iteration's (the slowest rank's)
  std::array<double, kMemTagCount> peak{};  // bytes, per tag
  double peak_total = 0, pinned_peak = 0, reserved = 0;
  double rows = 0;       // rows a rank's experts computed per iteration (the largest rank's)
  double sent_rows = 0;  // kept assignments a rank sent (the largest rank's)
  // This rank's own: rows, sent rows and peaks, of the last iteration.
  double local_rows = 0, local_sent_rows = 0;
  std::array<double, kMemTagCount> local_peak{};
  double comm_union_ms = 0;  // per iteration: time some S or R range was open (they share the link)
  double other_ms = 0;       // per iteration, the slowest rank's time outside S, C, R and M ranges
                             // (meaningful for a sequential run, where the ranges do not overlap)
  double median_ms() const;
  // Adds `later`'s iterations after these: times and ranges concatenated (a range one of them
  // lacks took 0 there), per-iteration means re-weighted, peaks and rows the larger.
  void append(const RunResult& later);
  // Each timed iteration's total of the named ranges (the slowest rank's per range).
  std::vector<double> ranges_each_ms(const std::vector<std::string>& names) const;
  // Busy time of one operation kind over forward and backward: "S", "C", "R", "M".
  double busy_ms(const std::string& kind) const;
};

// A configuration measured in paired rounds (LayerRunner::run_paired).
struct PairedConfig {
  PipelineConfig pipe;
  bool sequential = false;
  bool warm = false;  // already run on this runner, so no warm-up is needed
};

class LayerRunner {
 public:
  // Collective: every rank builds its part of the layer, on the program's streams and its two
  // communicators (S and R). `adam`: hold AdamW's state for the gate and the experts
  // (runtime/adamw.h) and step it after each backward, untimed, so model states are a training
  // step's.
  LayerRunner(const MeasureEnv& env, const LayerShape& shape, int tokens, const PipelineStreams& streams,
              Communicator& dispatch_comm, Communicator& combine_comm, std::optional<AdamStep> adam = std::nullopt);
  ~LayerRunner();
  // Collective. `sequential`: every stream is the compute stream.
  RunResult run(const PipelineConfig& pipe, bool sequential, int warmup, int iterations);
  // Collective. Configurations that are compared with each other, measured round by round: each
  // round runs one timed iteration of every configuration (its order rotated by one each round,
  // so none always follows the same neighbour), after `warmup` iterations of each that is not
  // warm. Iteration r of one result ran in the same round as iteration r of another: a ratio
  // taken per iteration pairs them. One result per configuration, in order.
  std::vector<RunResult> run_paired(const std::vector<PairedConfig>& configs, int warmup, int rounds);
  // Algorithm 1's profile: one untimed iteration, then the median of three (the slowest rank's ms).
  double profile(const PipelineConfig& pipe);

  PipelinedMoELayer& layer() { return *layer_; }
  const PipelinedMoELayer& layer() const { return *layer_; }
  const PipelineStreams& streams() const { return streams_; }
  Communicator& dispatch_comm() { return dispatch_comm_; }
  const MeasureEnv& env() const { return env_; }
  TrackingAllocator& allocator() { return alloc_; }
  int tokens() const { return tokens_; }
  const LayerShape& shape() const { return shape_; }

 private:
  void step(const PipelineStreams& st, Breakdown* b, double* rows, double* sent);
  MeasureEnv env_;
  LayerShape shape_;
  int tokens_;
  TrackingAllocator alloc_;
  PipelineStreams streams_;
  Communicator& dispatch_comm_;
  std::unique_ptr<PipelinedMoELayer> layer_;
  Buffer x_, y_, dy_, dx_;
  std::unique_ptr<AdamW> adam_;  // over the gate's weight, then the experts' w1 and w2
};

}  // namespace moebench
