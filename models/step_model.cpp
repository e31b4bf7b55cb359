#include "models/step_model.h"
#include <algorithm>
#include <cmath>
#include "models/collective_model.h"
#include "models/layout_rules.h"
#include "models/pipeline_simulator.h"

namespace moebench {
namespace {

// One layer's op times for one micro-batch on one rank.
struct LayerTimes {
  ForwardParts fwd;
  double b = 0;  // input-gradient backward (every GEMM's data gradient, elementwise, communication)
  double w = 0;  // weight-gradient GEMMs
};

class Model {
 public:
  Model(const ModelShape& m, const StepLayout& l, const HardwareProfile& hw)
      : m_(m), l_(l), hw_(hw), bytes_(l.half ? 2.0 : 4.0), t_(l.tp),
        n_(double(l.micro_batch_sequences) * m.seq), slots_(double(m.prototypes) * m.top_k) {}

  double gemm(double flops, bool fp32 = false) const { return hw_.gemm_seconds(flops, l_.half && !fp32); }
  // Elementwise kernels with math per element (GeLU, softmax, LayerNorm, cross-entropy, Adam) at
  // the profile's elementwise rate; pure data movement (copies, permutes, masks, residual adds) at
  // memory bandwidth.
  double mem(double bytes) const { return bytes / hw_.elementwise_bw; }
  double move(double bytes) const { return bytes / hw_.memory_bw; }
  Placement tp_group() const { return place_group(hw_, t_, 1); }
  Placement dp_group() const { return place_group(hw_, l_.dp, t_); }
  // DPMoE's expert-parallel group: DP ranks holding different experts (all of them when the
  // experts outnumber the DP group; else as many as there are experts).
  Placement ep_group() const { return place_group(hw_, std::min(l_.dp, std::max(m_.experts, 1)), t_); }
  double tp_all_reduce(double bytes) const { return t_ > 1 ? all_reduce_seconds(hw_, bytes, tp_group()) : 0; }

  // Rows (token assignments) the rank's experts compute, and its experts, per MoE layer.
  int local_experts() const {
    if (l_.kind == LayoutKind::ppmoe) return m_.experts / t_;
    return std::max(1, m_.experts / std::min(l_.dp, m_.experts));
  }
  double expert_rows() const {
    return l_.kind == LayoutKind::ppmoe ? n_ * slots_ / t_ : n_ * slots_;  // balanced routing
  }
  int capacity() const {
    if (m_.capacity_factor <= 0) return int(std::ceil(n_ * slots_ / m_.experts));
    return int(std::ceil(slots_ * n_ / m_.experts * m_.capacity_factor - 1e-9));
  }

  LayerTimes layer(bool moe) const {
    LayerTimes r;
    const double h = m_.hidden, f = m_.ffn, s = m_.seq, b = l_.micro_batch_sequences, a = m_.heads;
    const double d = h / a, heads_here = b * a / t_;
    // attention
    const double qkv = gemm(2 * n_ * h * 3 * h / t_), proj = gemm(2 * n_ * h * h / t_);
    const double core = 2 * heads_here * gemm(2 * s * s * d);  // scores and context
    const double softmax = mem(4 * heads_here * s * s * bytes_);
    r.fwd.attention = qkv + proj + core + softmax;
    r.fwd.attention_allreduce = tp_all_reduce(n_ * h * bytes_);
    r.fwd.other = mem(4 * n_ * h * bytes_) + move(6 * n_ * h * bytes_);  // two LayerNorms, two residual adds
    double comm_b = r.fwd.attention_allreduce;  // backward: f and g swap, one all-reduce each
    double moe_comm_f = 0;
    double w_gemms = qkv + proj;
    if (!moe) {
      const double up = gemm(2 * n_ * h * f / t_);
      r.fwd.ffn = 2 * up + mem(2 * n_ * f / t_ * bytes_);
      r.fwd.ffn_allreduce = tp_all_reduce(n_ * h * bytes_);
      comm_b += r.fwd.ffn_allreduce;
      w_gemms += 2 * up;
    } else {
      const double E = m_.experts;
      const double gate_gemm = gemm(2 * n_ * h * E, /*fp32=*/true);
      r.fwd.moe_gating = gate_gemm + mem(3 * n_ * E * 4);
      w_gemms += gate_gemm;
      double einsum = 0;
      if (l_.paper_gate) {
        // k rounds of arg-max, each over [T, E] (one-hot mask, cumulative sum, gate); the [T, E, C]
        // combine and dispatch tensors in every round or once (combine_per_round).
        const double C = capacity(), tec_passes = l_.combine_per_round ? m_.top_k : 1;
        r.fwd.moe_gating += m_.top_k * move(n_ * E * 4 * 5) + tec_passes * move(n_ * E * C * 4 * 3);
        einsum = gemm(2 * n_ * E * C * h, /*fp32=*/true);
      }
      const double rows = expert_rows() * l_.expert_load, per_expert = rows / local_experts();
      const double up = l_.batched_experts ? gemm(2 * rows * h * f) : local_experts() * gemm(2 * per_expert * h * f);
      r.fwd.moe_expert = 2 * up + mem(2 * rows * f * bytes_);
      w_gemms += 2 * up;
      const double moved = move(2 * rows * h * bytes_);  // permute in, weighted scatter out
      if (l_.kind == LayoutKind::dpmoe) {
        const double a2a = all_to_all_seconds(hw_, n_ * slots_ * h * bytes_, ep_group());
        r.fwd.moe_dispatch = a2a + moved / 2 + einsum;
        r.fwd.moe_combine = a2a + moved / 2 + einsum;
        moe_comm_f = 2 * a2a;
        comm_b += 2 * a2a;
      } else {  // PPMoE (and a one-rank MoE): index selection, then the TP all-reduce
        const double all_reduce = tp_all_reduce(n_ * h * bytes_);
        r.fwd.moe_dispatch = moved / 2 + einsum;
        r.fwd.moe_combine = moved / 2 + einsum + all_reduce;
        moe_comm_f = all_reduce;
        comm_b += all_reduce;  // the input gradient's
      }
    }
    // Backward: every GEMM's data gradient (the attention core's two per forward GEMM), the
    // elementwise ops and the MoE's local moves again, the communication.
    r.fwd.moe_comm = moe_comm_f;
    const double comm_f = r.fwd.attention_allreduce + r.fwd.ffn_allreduce + moe_comm_f;
    r.b = (r.fwd.total() - comm_f) + core + comm_b;
    r.w = w_gemms;
    return r;
  }

  // Embedding (first stage), final LayerNorm, LM head and loss (last stage).
  double embedding() const { return move(2 * n_ * m_.hidden * bytes_); }
  double head_fwd() const {
    return gemm(2 * n_ * m_.hidden * m_.vocab / t_) + mem(3 * n_ * m_.vocab / t_ * 4) + mem(2 * n_ * m_.hidden * bytes_);
  }
  double head_w() const { return gemm(2 * n_ * m_.hidden * m_.vocab / t_); }

  double send() const {
    const double act = n_ * m_.hidden * bytes_;
    const bool across = l_.dp * t_ >= hw_.gpus_per_node;
    return across ? send_recv_seconds(hw_, act, true) : send_recv_seconds(hw_, act / t_, false);
  }

  // Parameters on the most loaded rank: dense ones (TP-split) and its experts.
  double dense_layer_params() const {
    const double h = m_.hidden, f = m_.ffn;
    return (4 * h * h + 4 * h) / t_ + (2 * h * f + f) / t_ + h + 4 * h;
  }
  double moe_layer_params() const {
    const double h = m_.hidden, f = m_.ffn;
    return (4 * h * h + 4 * h) / t_ + 4 * h + h * m_.experts + local_experts() * (2 * h * f + f + h);
  }

  const ModelShape& m_;
  const StepLayout& l_;
  const HardwareProfile& hw_;
  double bytes_;
  int t_;
  double n_, slots_;
};

}  // namespace

double ForwardParts::total() const {
  return attention + attention_allreduce + ffn + ffn_allreduce + moe() + other;
}

std::optional<std::string> validate_step(const ModelShape& m, const StepLayout& l, const HardwareProfile& hw) {
  auto s = [](auto v) { return std::to_string(v); };
  for (auto [opt, v] : {std::pair{"--dp", l.dp}, {"--tp", l.tp}, {"--pp", l.pp}, {"--micro-batches", l.micro_batches},
                        {"--micro-batch-size", l.micro_batch_sequences}})
    if (v < 1) return std::string(opt) + ": must be >= 1, got " + s(v);
  if (!(l.expert_load >= 1))
    return "expert load: the busiest rank's expert rows over the mean rank's are at least 1, got " + s(l.expert_load);
  // What the trainer refuses, in its words (layout_rules.h), but a DP group holding replicas.
  if (auto e = trainer_layout_error(m, l.kind, l.dp, l.tp, l.pp, /*replicas=*/true)) return e;
  if (l.pp > 1)
    if (auto e = validate_pipeline_shape(l.pp, l.micro_batches)) return e;
  if (l.zero && l.zero_stage != 1 && l.zero_stage != 2) return "--zero-stage: " + s(l.zero_stage) + " is not modelled; allowed: 1 or 2";
  if (l.tp > hw.gpus_per_node)
    return "--tp: " + s(l.tp) + " exceeds the profile's " + s(hw.gpus_per_node) + " GPUs per node (TP stays inside a node)";
  const LayoutRow& row = layout_row(l.kind);
  if (row.experts_over != ExpertGroup::none) {
    if (m.top_k < 1 || m.prototypes < 1 || m.experts % m.prototypes != 0 || m.top_k > m.experts / m.prototypes)
      return "--top-k: " + s(m.top_k) + " of " + s(m.experts / std::max(m.prototypes, 1)) + " experts per prototype is not a routing";
  } else if (m.experts > 0) {
    return "--layout: " + std::string(row.option) + " takes no --experts";
  }
  return std::nullopt;
}

StepPrediction predict_step(const ModelShape& m, const StepLayout& l, const HardwareProfile& hw) {
  const Model model(m, l, hw);
  StepPrediction p;
  const int per_stage = m.layers / l.pp;
  const LayerTimes dense = model.layer(false), moe = m.experts > 0 ? model.layer(true) : dense;
  std::vector<StageOpTimes> times(l.pp);
  std::vector<ForwardParts> parts(l.pp);
  double worst = -1;
  int worst_stage = 0;
  for (int st = 0; st < l.pp; ++st) {
    ForwardParts& fp = parts[st];
    StageOpTimes& t = times[st];
    t.f = t.b = t.w = 0;
    for (int i = st * per_stage; i < (st + 1) * per_stage; ++i) {
      const LayerTimes& lt = m.is_moe(i) ? moe : dense;
      const ForwardParts& f = lt.fwd;
      fp.attention += f.attention; fp.attention_allreduce += f.attention_allreduce;
      fp.ffn += f.ffn; fp.ffn_allreduce += f.ffn_allreduce;
      fp.moe_gating += f.moe_gating; fp.moe_dispatch += f.moe_dispatch; fp.moe_expert += f.moe_expert;
      fp.moe_combine += f.moe_combine; fp.moe_comm += f.moe_comm; fp.other += f.other;
      t.b += lt.b;
      t.w += lt.w;
    }
    if (st == 0) { fp.other += model.embedding(); t.b += model.embedding(); }
    if (st == l.pp - 1) { fp.other += model.head_fwd(); t.b += model.head_fwd(); t.w += model.head_w(); }
    t.f = fp.total();
    const double total = t.f + t.b + t.w;
    if (total > worst) { worst = total; worst_stage = st; }
  }
  p.forward = parts[worst_stage];
  p.stage_f = times[worst_stage].f;
  p.stage_b = times[worst_stage].b;
  p.stage_w = times[worst_stage].w;
  const int M = l.micro_batches;
  if (l.pp > 1) {
    p.send = model.send();
    const PipelineSchedule sched = make_pipeline_schedule(l.schedule, l.pp, M);
    const PipelineSimulation sim = simulate_pipeline(sched, times, p.send, l.recompute);
    p.pipeline = sim.makespan;
    p.bubble = sim.bubble_fraction();
  } else {
    p.pipeline = M * (p.stage_f + p.stage_b + p.stage_w + (l.recompute ? p.stage_f : 0));
  }

  // Parameters, gradient sync and optimizer on the most loaded rank (the first stage: embedding).
  double dense_params = 0, expert_params = 0;
  for (int i = 0; i < per_stage; ++i) {
    if (m.is_moe(i)) {
      const double experts_here = model.local_experts() * (2.0 * m.hidden * m.ffn + m.ffn + m.hidden);
      expert_params += experts_here;
      dense_params += model.moe_layer_params() - experts_here;
    } else {
      dense_params += model.dense_layer_params();
    }
  }
  dense_params += double(m.vocab) * m.hidden / l.tp + double(m.seq) * m.hidden;
  p.params_per_gpu = dense_params + expert_params;
  // Which parameters are replicated over the DP group: the dense ones; PPMoE's experts too;
  // DPMoE's experts only where the DP group outnumbers the experts.
  const int expert_replicas = l.kind == LayoutKind::dpmoe ? std::max(1, l.dp / std::max(m.experts, 1)) : l.dp;
  const double bytes = l.half ? 2.0 : 4.0;
  double sync = all_reduce_seconds(hw, dense_params * bytes, model.dp_group());
  if (expert_params > 0 && expert_replicas > 1)
    sync += all_reduce_seconds(hw, expert_params * bytes,
                               l.kind == LayoutKind::dpmoe ? place_group(hw, expert_replicas, l.tp * l.dp / expert_replicas)
                                                               : model.dp_group());
  p.dp_sync = l.dp > 1 || expert_replicas > 1 ? sync : 0;
  const double dense_shards = l.zero ? l.dp : 1, expert_shards = l.zero ? expert_replicas : 1;
  p.optimizer = model.mem(28.0 * (dense_params / dense_shards + expert_params / expert_shards));
  p.step = p.pipeline + p.dp_sync + p.optimizer;
  p.tokens = double(l.dp) * M * l.micro_batch_sequences * m.seq;
  p.tokens_per_s_per_gpu = p.tokens / p.step / l.world();

  // Memory: model states (000: 18 bytes per parameter in fp16 Adam -- fp16 weights, fp32
  // gradients, fp32 master and moments; 16 in fp32: weights, gradients, moments), activations.
  const double state = l.half ? 18.0 : 16.0, optimizer_state = l.half ? 12.0 : 8.0, gradient = 4.0;
  const double sharded = optimizer_state + (l.zero && l.zero_stage >= 2 ? gradient : 0.0);
  p.model_state_bytes = dense_params * (state - sharded + sharded / dense_shards) +
                        expert_params * (state - sharded + sharded / expert_shards);
  const double s = m.seq, b = l.micro_batch_sequences, h = m.hidden, a = m.heads, t = l.tp;
  const double act_scale = l.half ? 1.0 : 2.0;
  const double dense_layer_act = act_scale * s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
  const double mlp_share = act_scale * s * b * h * 19 / t;
  const double moe_layer_act = dense_layer_act - mlp_share + act_scale * 23 * model.expert_rows() * h;
  double per_micro = 0;
  for (int i = 0; i < per_stage; ++i) per_micro += m.is_moe(i) ? moe_layer_act : dense_layer_act;
  if (l.recompute) per_micro = act_scale * 2 * s * b * h * per_stage + std::max(dense_layer_act, m.experts ? moe_layer_act : 0);
  const int in_flight = l.pp > 1 ? make_pipeline_schedule(l.schedule, l.pp, M).peak_in_flight(0) : 1;
  p.activation_bytes = in_flight * per_micro + (l.pp == 1 ? 4.0 * s * b * m.vocab / t : 0);
  p.fits = p.model_state_bytes + p.activation_bytes <= hw.memory_bytes;
  return p;
}

}  // namespace moebench
