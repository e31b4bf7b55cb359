// The training-step model: one step (forward, backward, gradient sync, optimizer) of a GPT model,
// dense or with MoE layers, in a DP x TP x PP layout (Dense, DPMoE or PPMoE; ZeRO-1; micro-batches
// and a pipeline schedule), on a hardware profile. Every term comes from the profile and the
// layout, nothing is fitted:
//   GEMMs      FLOPs / (peak x the profile's measured efficiency at that GEMM's size)
//   elementwise and optimizer   bytes moved / the profile's elementwise bandwidth (the suite's
//              kernels: memory-bound on a GPU, compute-bound scalar code on the CPU)
//   TP         two all-reduces of the activations per layer each way (Megatron's f and g)
//   MoE        DPMoE: two all-to-alls each way over the EP group (= the DP group); PPMoE: the
//              index-selected experts and one all-reduce over the TP group each way (000 Alg. 1);
//              M6-T's own gate: k rounds over the [T, E, C] tensors and the one-hot einsums
//   pipeline   the stage op times fed to the pipeline simulator on the schedule's table
//   DP         gradient all-reduce (ZeRO-1: reduce-scatter + all-gather) over the DP group
//   memory     18 bytes per parameter (000 Sec. 4.2: fp16 weights, fp32 gradients, fp32 master
//              and moments; ZeRO-1 shards the 12 bytes of optimizer state, ZeRO-2 the gradients'
//              4 too), activations per Korthikanti et al. 2022 (Megatron) times the micro-batches
//              in flight; over the profile's memory: out of memory.
#pragma once
#include "models/layout.h"
#include <optional>
#include <string>
#include <vector>
#include "models/hardware_profile.h"
#include "models/model_shape.h"
#include "models/pipeline_schedule.h"

namespace moebench {


// A layout (models/layout.h) and how a step runs in it.
struct StepLayout : ParallelLayout {
  int zero_stage = 1;             // with zero: 1 shards the optimizer states, 2 the gradients too
  int micro_batches = 1;          // per step and pipeline (gradient accumulation without PP)
  int micro_batch_sequences = 1;  // sequences in one micro-batch of one DP rank
  PipelineScheduleKind schedule = PipelineScheduleKind::one_f_one_b;
  bool recompute = false;
  bool half = true;               // fp16/bf16 weights and activations (false: fp32)
  // The busiest rank's expert rows over the mean rank's (1: routing spreads the tokens evenly;
  // a run's measured value where the model holds that run): every rank waits for it.
  double expert_load = 1.0;
  bool paper_gate = false;       // M6-T's looped arg-max gate (001 A.1), not the fused one
  // With paper_gate: each arg-max round adds into the [T, E, C] tensors, as the suite's looped gate
  // does (kernels/looped_gating.h), O(K^2); false: they are built once, O(K), as 001 Sec. 3.3
  // states and its Table 1 shows (its times at k = 1, 4 and 16 lie on a straight line).
  bool combine_per_round = true;
  bool batched_experts = false;  // the local experts as one batched GEMM (GShard's einsum), not a loop
};

// The option at fault, or nullopt.
std::optional<std::string> validate_step(const ModelShape& m, const StepLayout& l, const HardwareProfile& hw);

// Seconds per micro-batch on the slowest stage, by part, forward.
struct ForwardParts {
  double attention = 0;       // QKV, scores, context, output GEMMs and the softmax
  double attention_allreduce = 0;
  double ffn = 0;             // dense FFN GEMMs and GeLU
  double ffn_allreduce = 0;
  double moe_gating = 0;
  double moe_dispatch = 0;    // DPMoE's first all-to-all; PPMoE's index selection
  double moe_expert = 0;
  double moe_combine = 0;     // DPMoE's second all-to-all; PPMoE's all-reduce
  double moe_comm = 0;        // of dispatch and combine: their communication alone
  double other = 0;           // LayerNorms, residuals, embedding, head and loss
  double moe() const { return moe_gating + moe_dispatch + moe_expert + moe_combine; }
  double total() const;
};

struct StepPrediction {
  ForwardParts forward;            // one micro-batch, slowest stage
  double stage_f = 0, stage_b = 0, stage_w = 0;  // slowest stage's op times per micro-batch
  double send = 0;                 // one activation between stages
  double pipeline = 0;             // forward + backward of every micro-batch (simulated when PP > 1)
  double bubble = 0;               // idle share of the pipeline time
  double dp_sync = 0, optimizer = 0;
  double step = 0;                 // seconds
  double tokens = 0;               // per step, the whole cluster
  double tokens_per_s_per_gpu = 0;
  double params_per_gpu = 0;       // the most loaded rank
  double model_state_bytes = 0, activation_bytes = 0;
  bool fits = true;                // model states + activations <= the profile's memory
};

StepPrediction predict_step(const ModelShape& m, const StepLayout& l, const HardwareProfile& hw);

}  // namespace moebench
