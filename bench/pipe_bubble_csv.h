// What moebench_pipe_bubble measured, per case (a schedule at a micro-batch count), and what it
// writes from it: pipe/bubble.csv, a row per stage (its op times, its measured bubble against the
// simulator's, the replay of every op's own time, (P - 1) / (M + P - 1), and the weight gradients
// against one micro-batch's), and the console's
// ZB-H1 over 1F1B lines.
#pragma once
#include <map>
#include <string>
#include <vector>
#include "harness/bench.h"
#include "models/pipeline_simulator.h"

namespace moebench {

constexpr double kSimulatorTarget = 0.05;  // |measured - simulated| step time, relative
constexpr double kZeroBubbleTarget = 0.4;  // ZB-H1's bubble over 1F1B's

struct Case {
  PipelineScheduleKind kind;
  int micro_batches = 1;
  bool recompute = false;
  std::string name() const {
    return "pipe_bubble/" + schedule_name(kind) + "/M" + std::to_string(micro_batches) + (recompute ? "/recompute" : "");
  }
};

// One repetition, every stage: busy ms, step ms, mean F, B, W ms, peak activation bytes.
constexpr int kFields = 6;

struct PipeBubbleRecord {
  int mini = 1;                    // rows of the mini-batch
  std::vector<int> micro;          // micro-batch counts, ascending
  std::map<int, double> send_ms;   // by micro-batch count: one micro-batch's activations
  std::map<std::string, Case> cases;
  std::map<std::string, std::vector<std::vector<double>>> samples;  // per case: per repetition, P x kFields
  std::map<std::string, std::vector<std::vector<double>>> op_ms;    // per case: per repetition, every op's ms
  // per case: per repetition, the weight gradients' largest relative difference from GPipe's
  // with one micro-batch (-1: that reference did not run)
  std::map<std::string, std::vector<double>> grads_off;
};

// `processors`: how many ops the stages can run at once (0: one per stage).
void write_bubble_csv(const BenchContext& ctx, const PipeBubbleRecord& rec, const std::vector<RunRecord>& runs, int processors);

}  // namespace moebench
