#include "models/pipeline_simulator.h"
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

namespace moebench {

double PipelineSimulation::bubble_fraction(int stage) const { return makespan > 0 ? idle(stage) / makespan : 0; }

double PipelineSimulation::bubble_fraction() const {
  double idle_sum = 0;
  for (std::size_t s = 0; s < busy.size(); ++s) idle_sum += idle(int(s));
  return makespan > 0 ? idle_sum / (makespan * double(busy.size())) : 0;
}

double ideal_bubble_fraction(int stages, int micro_batches) {
  return double(stages - 1) / double(micro_batches + stages - 1);
}

// The event loop both entry points share: op_time(s, i, step) is the duration of stage s's
// i-th op of the table. Ops are placed in the order they could start (each stage's next op once
// its inputs are known), so with few processors the one that became ready first takes the next
// free one; with a processor per stage an op starts as soon as its stage and inputs allow.
template <class OpTime>
static PipelineSimulation run_table(const PipelineSchedule& schedule, double send, int processors, OpTime op_time) {
  const int P = schedule.stages, M = schedule.micro_batches;
  if (processors < 0)
    throw std::invalid_argument("simulate_pipeline: " + std::to_string(processors) + " processors; allowed: >= 0");
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  // end[op][s][j]: when op of micro-batch j finished on stage s.
  std::vector<std::vector<std::vector<double>>> end(3, std::vector<std::vector<double>>(P, std::vector<double>(M, kNotYet)));
  auto slot = [](PipeOp op) { return op == PipeOp::F ? 0 : op == PipeOp::B ? 1 : 2; };
  auto ready_at = [&](int s, const PipeStep& step) {
    const int j = step.micro;
    switch (step.op) {
      case PipeOp::F: return s == 0 ? 0.0 : end[0][s - 1][j] + send;
      case PipeOp::B: return std::max(end[0][s][j], s == P - 1 ? 0.0 : end[1][s + 1][j] + send);
      case PipeOp::W: return end[1][s][j];
    }
    return kNotYet;
  };

  PipelineSimulation sim;
  sim.busy.assign(P, 0);
  sim.ops.assign(P, {});
  std::vector<std::size_t> next(P, 0);
  std::vector<double> free_at(P, 0);
  std::vector<double> processor_free(processors > 0 && processors < P ? processors : 0, 0.0);
  std::size_t left = 0;
  for (const auto& st : schedule.steps) left += st.size();
  while (left > 0) {
    int s = -1;
    double start = kNotYet;
    for (int c = 0; c < P; ++c) {
      if (next[c] >= schedule.steps[c].size()) continue;
      const double ready = ready_at(c, schedule.steps[c][next[c]]);
      if (ready == kNotYet) continue;  // its input comes later
      const double can = std::max(free_at[c], ready);
      if (can < start) s = c, start = can;
    }
    if (s < 0)
      throw std::invalid_argument("simulate_pipeline: the " + schedule_name(schedule.kind) +
                                  " table cannot run: every stage waits on an op its peer has not reached");
    const PipeStep step = schedule.steps[s][next[s]];
    const double d = op_time(s, next[s], step.op);
    if (!processor_free.empty()) {
      const auto first_free = std::min_element(processor_free.begin(), processor_free.end());
      start = std::max(start, *first_free);
      *first_free = start + d;
    }
    end[slot(step.op)][s][step.micro] = free_at[s] = start + d;
    sim.busy[s] += d;
    sim.ops[s].push_back({step, start, start + d});
    sim.makespan = std::max(sim.makespan, start + d);
    ++next[s];
    --left;
  }
  return sim;
}

PipelineSimulation simulate_pipeline(const PipelineSchedule& schedule, const std::vector<StageOpTimes>& times, double send,
                                     bool recompute, int processors) {
  const int P = schedule.stages;
  if (times.size() != 1 && int(times.size()) != P)
    throw std::invalid_argument("simulate_pipeline: " + std::to_string(times.size()) + " stage times for " +
                                std::to_string(P) + " stages");
  return run_table(schedule, send, processors, [&](int s, std::size_t, PipeOp op) {
    const StageOpTimes& t = times.size() == 1 ? times[0] : times[s];
    switch (op) {
      case PipeOp::F: return t.f;
      case PipeOp::B: return (schedule.splits_backward() ? t.b : t.b + t.w) + (recompute ? t.f : 0);
      case PipeOp::W: return t.w;
    }
    return 0.0;
  });
}

PipelineSimulation replay_pipeline(const PipelineSchedule& schedule, const std::vector<std::vector<double>>& op_ms, double send,
                                   int processors) {
  const int P = schedule.stages;
  if (int(op_ms.size()) != P)
    throw std::invalid_argument("replay_pipeline: op times for " + std::to_string(op_ms.size()) + " stages, the table has " +
                                std::to_string(P));
  for (int s = 0; s < P; ++s)
    if (op_ms[s].size() != schedule.steps[s].size())
      throw std::invalid_argument("replay_pipeline: stage " + std::to_string(s) + " has " + std::to_string(op_ms[s].size()) +
                                  " op times, the table " + std::to_string(schedule.steps[s].size()) + " ops");
  return run_table(schedule, send, processors, [&](int s, std::size_t i, PipeOp) { return op_ms[s][i]; });
}

}  // namespace moebench
