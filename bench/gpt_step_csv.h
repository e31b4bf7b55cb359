// What moebench_gpt_step measured, per model (false: dense, true: with MoE layers), and the three
// CSVs it writes from it: gpt/step.csv (a step's time, PyTorch's beside it, memory, the plans and
// pool blocks inside the measured steps, the roofline), gpt/step_breakdown.csv (the eager steps'
// ranges with their work and floor) and gpt/step_kernels.csv (--kernels).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>
#include "gpt/gpt_trainer.h"
#include "harness/bench.h"
#include "harness/kernel_table.h"
#include "harness/range_tree.h"
#include "harness/torch_reference.h"
#include "kernels/batched_gemm.h"
#include "models/roofline.h"

namespace moebench {

// One device: TP = PP = DP = 1; the MoE model's experts all local.
ParallelLayout gpt_step_layout(bool moe);

struct GptStepRecord {
  ModelShape shape;  // its MoE variant: top-1, dropless, an MoE layer on every other FFN
  int sequences = 2;
  AttentionKernel attention = AttentionKernel::materialized;
  int panel_rows = 0;
  ExpertGemm expert_gemm = ExpertGemm::grouped;
  bool captured = false;  // steps replayed from a graph where the model allows (dense; MoE with segmented experts)
  RooflineProfile roofline;
  std::map<std::string, TorchRun> reference;  // per model, PyTorch's fastest variant (torch_step.py)
  std::map<bool, std::size_t> graph_nodes;
  std::map<bool, int> warmup_steps;                         // its measured trainer's
  std::map<bool, double> peak_mib;                          // over the measured steps
  std::map<bool, BatchedGemmAlgoStats> plans_in_measured;   // plans made and timed in them
  std::map<bool, std::int64_t> pool_blocks_in_measured;     // blocks taken from the system in them (busiest rank)
  std::map<bool, double> computed_over_routed;              // its experts' rows computed over routed; 0: untold
  std::map<bool, std::vector<RangeRow>> phases;             // its eager steps' ranges
  bool log_kernels = false;                                 // --kernels
  std::string kernel_log_failure;                           // why --kernels logs nothing
  std::map<bool, KernelLogRuns> kernels;

  // Whether the model's measured steps are replayed from a graph: the MoE model's only with
  // segmented experts, the other routes reading their counts on the host.
  bool step_captured(bool moe) const;
};

// `ms`: each model's measured step time.
void write_step_csv(const BenchContext& ctx, const GptStepRecord& rec, const std::map<bool, Spread>& ms);
void write_step_breakdown(const BenchContext& ctx, const GptStepRecord& rec);
void write_step_kernels(const BenchContext& ctx, const GptStepRecord& rec, const std::map<bool, Spread>& measured);

}  // namespace moebench
