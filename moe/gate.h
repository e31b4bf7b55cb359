// The gate (router): an fp32 linear projection (PPMoE keeps the gate in fp32; its GEMMs run in
// full fp32, never TF32, so GPU routing follows the CPU reference), softmax and top-k per
// prototype, capacity and positions per token group, and the load-balancing loss.
// Produces the Routing every dispatcher consumes -- one per micro-batch, owned by the caller --
// and backward turns the combine-weight gradients (plus the aux-loss gradient) into the
// micro-batch's gate-weight gradient and the input gradient. The gate keeps weights only;
// every call runs on the stream it is given.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "kernels/capacity.h"
#include "moe/config.h"

namespace moebench {

struct Routing {
  CapacityShape shape;  // tokens, experts, prototypes, k, groups, capacity
  Buffer x32;                      // the input as fp32 when it is fp16 (backward reads it; bf16 needs none)
  Buffer logits, probs;            // [T, E] fp32
  Buffer expert, position;         // [T, S] int32: global expert id; position in its expert or -1
  Buffer weight;                   // [T, S] fp32 combine weights
  // On the device, what the host reads: [G, E] int32 routed and kept counts (the host sizes the
  // dispatch with them: the forward copies them, alone), then with the aux loss on [G, E] fp32
  // density and proxy (read when asked, Gate::read_counts).
  Buffer host_read_dev;
  bool counts_on_host = false;             // routed and kept are filled
  std::vector<std::int32_t> routed, kept;  // host copies [G, E]
  std::vector<float> density, proxy;       // host [G, E], with the aux loss on, once read
  // The paper gate's dense tensors (GateImpl::paper), [T, E, C] fp32: combine weights at
  // (token, expert, position) and the dispatch mask (combine != 0). Empty for the fused gate.
  Buffer combine, dispatch;
  std::optional<double> aux_loss_on_host;  // mean over groups (0 with the aux loss off), once read
  // Only the assignments to some experts (one step of a FasterMoE-style exchange; the other
  // slots are -1 here and belong to other slices): the dispatcher adds the combine into y and
  // the dispatch backward into dx, and writes this slice's combine-weight gradients only.
  bool expert_slice = false;
  std::size_t group_experts() const { return std::size_t(shape.groups) * shape.gate.experts; }
  std::int32_t* routed_dev() const { return host_read_dev.as<std::int32_t>(); }
  std::int32_t* kept_dev() const { return routed_dev() + group_experts(); }
  float* density_dev() const { return reinterpret_cast<float*>(kept_dev() + group_experts()); }  // with the aux loss
  int tokens() const { return shape.gate.tokens; }
  int groups() const { return shape.groups; }
  int slots() const { return shape.gate.slots(); }
  bool one_hot() const { return bool(combine); }
  // The aux loss, mean over groups; throws until Gate::read_counts (MoELayer::read_counts) read it.
  double aux_loss() const;
};

// Load statistics of one step, from kept (computed) and routed token counts per expert.
struct LoadStats {
  std::vector<double> routed, kept;  // per expert, summed over groups
  double cv = 0.0;                   // sigma / mu of kept (M6-T Sec. 3.1)
  double dropped_fraction = 0.0;     // assignments over capacity / all assignments
};
LoadStats load_stats(const std::vector<std::int32_t>& routed, const std::vector<std::int32_t>& kept, int experts);
double coefficient_of_variation(const std::vector<double>& v);

class Gate {
 public:
  Gate(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc);
  void init(std::uint64_t seed, const Stream& s);
  // x [T, h] in cfg.dtype; groups divide T. With `read_counts`, copies the routed and kept counts
  // to the host and waits for them, where the dispatch is sized with them: the copy is queued
  // before the aux statistics, which the device computes while the host waits and plans (the
  // host reads them later, when asked); without, nothing waits and the host copies come later.
  Routing forward(const void* x, int tokens, int groups, const Stream& s, bool read_counts = true);
  // What the host has not read yet, in one copy and a wait: fills r.routed and r.kept, and
  // r.density, r.proxy and the aux loss.
  void read_counts(Routing& r, const Stream& s);
  // dweight [T, S]; adds the gate's input gradient into dx [T, h] (cfg.dtype) and writes this
  // micro-batch's gate-weight gradient to grad_out [h, E] (fp32). aux_scale multiplies the
  // aux-loss gradient (dispatchers that replicate tokens over ranks let each rank add its share).
  void backward(const Routing& r, const void* x, const float* dweight, void* dx, float aux_scale, float* grad_out,
                const Stream& s);

  const MoEConfig& config() const { return cfg_; }
  // The factor the model's loss was scaled by (fp16 training scales it up so its gradients do
  // not flush to zero): the aux loss's gradient takes it too, so the optimizer's division holds.
  void set_loss_scale(float scale) { loss_scale_ = scale; }
  Buffer& weight() { return weight_; }  // [h, E] fp32
  Buffer& grad() { return grad_; }      // accumulated over micro-batches; see MoELayer::zero_grad

 private:
  Exec fp32_exec(const Stream& s) const;  // the device's exec without tensor cores
  // logits -> probs, expert, weight, position, routed / kept counts: fused or looped (paper).
  // The fused route takes the bf16 GEMM's unsummed slices where there are some (and sums them
  // into the logits in its first kernel).
  void route_fused(Routing& r, const float* slices, const Stream& s);
  void route_looped(Routing& r, const Stream& s);
  // bf16 tokens: the logits' three slices [T, 3E] (summed, they are the logits), and the
  // backward's weight and input gradients, from bf16 parts of fp32 values (kernels/bf16_split.h)
  // on the tensor cores, to fp32 accuracy.
  Buffer logit_slices_bf16(const void* x, int tokens, const Stream& s);
  void backward_bf16(const void* x, int tokens, const void* dparts, void* dx, float* grad_out, const Stream& s);
  const MoEConfig& cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer weight_, grad_;
  // Queues the copy of `words` 4-byte words of r.host_read_dev from `first` into
  // host_read_pinned_, which it returns, and records copied_ after it: the host reads them once
  // copied_ completes.
  const std::int32_t* copy_to_host(const Routing& r, std::size_t first, std::size_t words, const Stream& s);
  void take_counts(Routing& r, const std::int32_t* host) const;  // routed, then kept
  Buffer host_read_pinned_;  // where the copies of Routing::host_read_dev land
  std::optional<Event> copied_;
  float loss_scale_ = 1.f;
};

}  // namespace moebench
