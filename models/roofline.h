// The roofline of a measured row: its FLOPs, the least memory traffic it needs, and the floor
// max(FLOPs / GEMM rate, bytes / bandwidth) at the rates of the device's profile (moebench_profile
// on that device: the best GEMM rate its sweep measured and its copy bandwidth), with the
// achieved TFLOP/s and the measured time over the floor.
//
// Work is counted as the useful work of the paper's computation, not of this suite's kernels:
//   MoE layer (one rank, forward + backward): the gate 6 T h E, the experts 12 R h f over the R
//     rows routed to this rank's experts; bytes: the rank's expert and gate weights read in the
//     forward and again in the backward and their gradients written once, x, y, dy, dx once,
//     and the experts' hidden activation (R f) written once and read once;
//   GPT step (one rank holding the whole model): 3 x the forward's 2 x (the matmuls' weights) per
//     token plus causal attention (2 S^2 h per layer and sequence: half the square), an MoE
//     layer's top-k experts and gate in place of its FFN; bytes: the weights read in the forward
//     and the backward, the gradients written, AdamW reading the gradient and reading and writing
//     an fp32 master, m and v and writing the weight, and each saved activation written and read
//     once (per layer and token 7 h + 2 f, and the logits, whose loss reads them in the
//     element type).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include "models/hardware_profile.h"
#include "models/model_shape.h"

namespace moebench {

struct Work {
  double flops = 0, bytes = 0;
};

// One rank's MoE layer: `tokens` on this rank, `local_experts` of `experts` held here, `rows`
// routed to them (kept slots), 16-bit or 32-bit elements.
Work moe_layer_work(double tokens, int hidden, int ffn, int experts, int local_experts, double rows, int element_bytes);
// Its experts alone (the expert GEMMs, forward and backward): 12 R h f FLOPs; their weights read
// twice and gradients written once, and the hidden activation written and read once.
Work moe_expert_work(int hidden, int ffn, int local_experts, double rows, int element_bytes);
// One training step of the whole model on `sequences` sequences (dropless top-k MoE layers route
// every token to top_k x prototypes experts).
Work gpt_step_work(const ModelShape& shape, int sequences, int element_bytes);
// The same step's work by phase, each named as the step's breakdown range that runs it
// (GptTrainer::set_breakdown), over all layers: embed.*, ln.*, attention.qkv|core|out.fwd|bwd,
// attention.wgrad, ffn.*, the MoE layer's moe.gating, moe.dispatch, moe.expert, moe.combine and
// their .bwd (its weight gradients are in its backward), head.* and step.optimizer. The FLOPs sum
// to gpt_step_work's. A phase's bytes are its own least traffic: its weights read once, its weight
// gradients written once, and each activation it takes from or leaves to another phase moved
// once -- so, every boundary costing a round trip, they sum to more than the whole step's.
std::vector<std::pair<std::string, Work>> gpt_step_phases(const ModelShape& shape, int sequences, int element_bytes);

struct Roofline {
  double flops = 0, bytes = 0;
  double gemm_flops_per_s = 0, bytes_per_s = 0;  // the rates the floor is taken at
  double floor_ms = 0;
  double achieved_tflops = 0;  // flops over the measured time
  double time_over_floor = 0;
  std::string bound;           // "compute" or "memory": which term sets the floor
};

// The rates one rank of a run gets from a profile measured with hw.gpus_per_node ranks: on a GPU
// each rank has its device; on the CPU backend ranks share the machine's `cores`, so a run of
// `ranks` ranks gets the profile's per-rank rate times max(1, P / cores) x min(1, cores / ranks).
double rank_rate_scale(const HardwareProfile& hw, bool gpu, int ranks, int cores);
Roofline roofline(const Work& w, const HardwareProfile& hw, bool half, double rate_scale, double measured_ms);

// The profile a bench's rows take their floor from: moebench_profile's CSV of this device.
struct RooflineProfile {
  std::optional<HardwareProfile> hw;  // none: the columns are n/a, `note` says why
  std::string note;                   // the profile used, or why there is none
  double rate_scale = 1;
};
// Reads `path` (given to `option`); a profile measured on another backend or device than the
// run's (`backend`, `device`), or on a GPU in the other precision (fp32 against fp16/bf16, the
// run's `dtype`), is not used and the note says so; a file that does not load is an error naming
// the option.
RooflineProfile load_roofline_profile(const std::string& option, const std::string& path, const std::string& backend,
                                      const std::string& device, const std::string& dtype, int ranks, int cores);
// The columns a bench row gains: flops, min_bytes, floor_ms, floor_bound, achieved_tflops,
// time_over_floor, roofline_profile.
const std::vector<std::string>& roofline_columns();
std::vector<std::string> roofline_cells(const RooflineProfile& p, const Work& w, bool half, double measured_ms);

}  // namespace moebench
