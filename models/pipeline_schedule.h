// Pipeline schedules as tables: for each stage, the ordered list of (op, micro-batch) it runs,
// computed once. One engine executes the table on the ranks and the simulator
// (pipeline_simulator.h) predicts its timeline from the same table.
//   GPipe (002 Sec. 8.3): every forward, then every backward.
//   1F1B (Megatron's non-interleaved schedule): stage s runs min(P - s - 1, M) warm-up forwards,
//     then one forward and one backward alternately, then the remaining backwards.
//   ZB-H1 (zero-bubble pipeline parallelism): the backward split into B (input gradient, on the
//     critical path) and W (weight gradient, deferrable); 1F1B's order of F and B, with stage s
//     running W of micro-batch j after B of micro-batch j + s. Every stage then holds P
//     micro-batches' activations at most (1F1B's peak, on its first stage), and with F = B = W
//     the bubble is a third of 1F1B's: (P - 1) F instead of (P - 1) (F + B + W).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace moebench {

enum class PipeOp : char {
  F = 'F',  // forward
  B = 'B',  // backward: the whole of it, or only the input gradient where the schedule splits it
  W = 'W',  // weight gradient (split schedules only)
};

enum class PipelineScheduleKind { gpipe, one_f_one_b, zb_h1 };

struct PipeStep {
  PipeOp op;
  int micro;  // 0-based micro-batch
  bool operator==(const PipeStep&) const = default;
};

struct PipelineSchedule {
  PipelineScheduleKind kind = PipelineScheduleKind::gpipe;
  int stages = 0;
  int micro_batches = 0;
  std::vector<std::vector<PipeStep>> steps;  // [stage] -> its ops in order

  // Whether B is the input gradient alone, W the weight gradient: read from the steps (a W in them).
  bool splits_backward() const { return split_; }
  // "F0 F1 B0 ..." for one stage.
  std::string describe(int stage) const;
  // Micro-batches whose activations a stage holds at once at most: forward done, last backward
  // op (W where the backward is split, else B) not yet.
  int peak_in_flight(int stage) const;

 private:
  friend PipelineSchedule make_pipeline_schedule(PipelineScheduleKind, int, int);
  bool split_ = false;
};

// The schedules, one row each: the table the programs' choices are built from. A new schedule of
// one stage per rank is its builder, its row and its tests (pipeline/README.md says what one of
// several stages per rank needs).
struct ScheduleRow {
  PipelineScheduleKind kind;
  const char* name;
  // One stage's ops in order, of `stages` stages and `micro_batches` micro-batches.
  std::vector<PipeStep> (*stage_steps)(int stages, int micro_batches, int stage);
};
const std::vector<ScheduleRow>& schedule_table();
std::vector<std::string> schedule_names();

// The row's name ("gpipe", "1f1b", "zb-h1").
std::string schedule_name(PipelineScheduleKind kind);
std::optional<PipelineScheduleKind> parse_schedule(const std::string& name);

// Why (stages, micro_batches) cannot be scheduled, naming the option; nullopt if it can.
std::optional<std::string> validate_pipeline_shape(int stages, int micro_batches);

// Throws std::invalid_argument for a shape validate_pipeline_shape refuses.
PipelineSchedule make_pipeline_schedule(PipelineScheduleKind kind, int stages, int micro_batches);

}  // namespace moebench
