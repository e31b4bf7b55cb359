// Discrete-event simulation of a pipeline schedule table (pipeline_schedule.h): each stage runs
// its ops in the table's order, an op starting when its stage is free and its inputs are there
// -- F(s, j) after F(s - 1, j) and the send between them, B(s, j) after B(s + 1, j) and the send,
// W(s, j) after B(s, j) -- from per-stage op times (measured ones, to predict a run's bubble).
// With `processors` > 0 at most that many ops run at once (stages sharing a machine's cores,
// as P ranks on fewer cores do): an op whose inputs are there waits for a processor, taken
// first come first served and held to the op's end (a short op is not preempted); 0: every
// stage has its own (a GPU each).
#pragma once
#include <vector>
#include "models/pipeline_schedule.h"

namespace moebench {

// One stage's op times (any unit, ms in the benches). Where the schedule does not split the
// backward, its B takes b + w; `recompute` adds a forward to every backward (the activations
// recomputed from the stage's input instead of kept).
struct StageOpTimes {
  double f = 1, b = 1, w = 1;
};

struct SimulatedOp {
  PipeStep step;
  double start = 0, end = 0;
};

struct PipelineSimulation {
  double makespan = 0;                        // first op's start (0) to the last op's end
  std::vector<double> busy;                   // per stage
  std::vector<std::vector<SimulatedOp>> ops;  // per stage, in the table's order
  // Idle share of the makespan, per stage and over all stages.
  double bubble_fraction(int stage) const;
  double bubble_fraction() const;
  double idle(int stage) const { return makespan - busy.at(stage); }
};

// `times` holds one entry per stage (or one for all); `send` is the time a stage boundary adds
// to each activation or gradient. Throws std::invalid_argument for a table that cannot run
// (an op waiting on one its peer never reaches).
PipelineSimulation simulate_pipeline(const PipelineSchedule& schedule, const std::vector<StageOpTimes>& times,
                                     double send = 0, bool recompute = false, int processors = 0);

// The same table replayed with each op's own duration -- op_ms[s][i] for the i-th op of stage s
// in the table's order (a run's measured ops, say) -- so the prediction carries the run's
// op-to-op variation, which mean times average away (a schedule that synchronises stages at
// every micro-batch, like 1F1B, pays the slower of two jittered ops each time). Throws
// std::invalid_argument where op_ms does not have one entry per op of the table.
PipelineSimulation replay_pipeline(const PipelineSchedule& schedule, const std::vector<std::vector<double>>& op_ms,
                                   double send = 0, int processors = 0);

// (P - 1) / (M + P - 1): GPipe's and 1F1B's bubble with equal op times and free sends.
double ideal_bubble_fraction(int stages, int micro_batches);

}  // namespace moebench
