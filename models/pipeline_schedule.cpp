#include "models/pipeline_schedule.h"
#include <algorithm>
#include <stdexcept>

namespace moebench {


std::optional<std::string> validate_pipeline_shape(int stages, int micro_batches) {
  if (stages < 1) return "--pp: " + std::to_string(stages) + " pipeline stages; allowed: >= 1";
  if (micro_batches < 1) return "--micro-batches: " + std::to_string(micro_batches) + "; allowed: >= 1";
  return std::nullopt;
}

std::string PipelineSchedule::describe(int stage) const {
  std::string out;
  for (const PipeStep& s : steps.at(stage)) {
    if (!out.empty()) out += ' ';
    out += static_cast<char>(s.op) + std::to_string(s.micro);
  }
  return out;
}

int PipelineSchedule::peak_in_flight(int stage) const {
  const PipeOp last = splits_backward() ? PipeOp::W : PipeOp::B;
  int held = 0, peak = 0;
  for (const PipeStep& s : steps.at(stage)) {
    if (s.op == PipeOp::F) peak = std::max(peak, ++held);
    if (s.op == last) --held;
  }
  return peak;
}

namespace {

std::vector<PipeStep> gpipe_stage(int M) {
  std::vector<PipeStep> out;
  for (int j = 0; j < M; ++j) out.push_back({PipeOp::F, j});
  for (int j = 0; j < M; ++j) out.push_back({PipeOp::B, j});
  return out;
}

// 1F1B's order of F and B on stage s; with `w_delay` >= 0, W of micro-batch j follows B of
// micro-batch j + w_delay (and the W still owed follow the last B).
std::vector<PipeStep> one_f_one_b_stage(int P, int M, int s, int w_delay) {
  std::vector<PipeStep> out;
  const int warmup = std::min(P - s - 1, M);
  int next_w = 0;
  auto backward = [&](int j) {
    out.push_back({PipeOp::B, j});
    if (w_delay >= 0 && j - w_delay >= 0) out.push_back({PipeOp::W, next_w++});
  };
  for (int j = 0; j < warmup; ++j) out.push_back({PipeOp::F, j});
  for (int k = 0; k < M - warmup; ++k) {  // steady state: one forward, one backward
    out.push_back({PipeOp::F, warmup + k});
    backward(k);
  }
  for (int k = M - warmup; k < M; ++k) backward(k);  // cool-down
  if (w_delay >= 0)
    while (next_w < M) out.push_back({PipeOp::W, next_w++});
  return out;
}

}  // namespace

const std::vector<ScheduleRow>& schedule_table() {
  static const std::vector<ScheduleRow> rows = {
      {PipelineScheduleKind::gpipe, "gpipe", [](int, int M, int) { return gpipe_stage(M); }},
      {PipelineScheduleKind::one_f_one_b, "1f1b", [](int P, int M, int s) { return one_f_one_b_stage(P, M, s, -1); }},
      {PipelineScheduleKind::zb_h1, "zb-h1", [](int P, int M, int s) { return one_f_one_b_stage(P, M, s, s); }},
  };
  return rows;
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const ScheduleRow& r : schedule_table()) out.push_back(r.name);
  return out;
}

std::string schedule_name(PipelineScheduleKind kind) {
  for (const ScheduleRow& r : schedule_table())
    if (r.kind == kind) return r.name;
  return "?";
}

std::optional<PipelineScheduleKind> parse_schedule(const std::string& name) {
  for (const ScheduleRow& r : schedule_table())
    if (r.name == name) return r.kind;
  return std::nullopt;
}

PipelineSchedule make_pipeline_schedule(PipelineScheduleKind kind, int stages, int micro_batches) {
  if (auto e = validate_pipeline_shape(stages, micro_batches)) throw std::invalid_argument(*e);
  const auto row = std::find_if(schedule_table().begin(), schedule_table().end(),
                                [&](const ScheduleRow& r) { return r.kind == kind; });
  if (row == schedule_table().end()) throw std::invalid_argument("make_pipeline_schedule: a schedule with no row");
  PipelineSchedule sch;
  sch.kind = kind;
  sch.stages = stages;
  sch.micro_batches = micro_batches;
  for (int s = 0; s < stages; ++s) {
    sch.steps.push_back(row->stage_steps(stages, micro_batches, s));
    for (const PipeStep& step : sch.steps.back()) sch.split_ = sch.split_ || step.op == PipeOp::W;
  }
  return sch;
}

}  // namespace moebench
