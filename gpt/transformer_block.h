// One pre-norm decoder block (GPT-2/3), forward and backward:
//   h = x + Attention(LN1(x));   y = h + W2 GeLU(W1 LN2(h))
// Weights, gradients and activations in `dtype` (fp32, or fp16/bf16 with fp32 arithmetic and
// the LayerNorms' parameters in fp32); gradients accumulate over micro-batches; rows are
// `sequences` sequences of `seq` tokens. The block's weights depend on (seed, layer) alone.
// Tensor parallelism (Megatron-LM): over a TP communicator of t ranks, rank r holds heads
// [r heads/t, (r+1) heads/t) of the attention (Wqkv's columns, Wo's rows) and columns
// [r ffn/t, (r+1) ffn/t) of W1 (rows of W2); the LayerNorms are replicated. Each half ends in
// Megatron's g (an all-reduce of the partial outputs; identity in backward) and starts with f
// (identity; an all-reduce of the input gradient in backward).
// An MoE block (PPMoE's every other FFN) has an MoE layer in the MLP's place, y = h + MoE(LN2(h)),
// on a dispatcher of the caller's choosing: local, expert-parallel (DPMoE: the ranks of its
// all-to-all hold different tokens) or PPMoE (inside the TP group: its ranks hold the same
// tokens, index-select their experts and all-reduce, so the block adds no f or g of its own).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>
#include <functional>
#include <memory>
#include "moe/moe_layer.h"
#include "gpt/attention.h"
#include "gpt/data_parallel.h"
#include "comm/comm.h"

namespace moebench {

struct TransformerBlockConfig {
  int hidden = 0, heads = 0, ffn = 0;  // the whole block's
  int layer = 0;
  std::optional<MoEConfig> moe;  // set: an MoE layer in the MLP's place (its hidden = hidden, its dtype = dtype)
  DType dtype = DType::f32;
  AttentionKernel attention = AttentionKernel::by_backend;
  int attention_panel_rows = 512;  // blocked attention's (AttentionConfig::panel_rows)
};

// Makes an MoE block's dispatcher.
using DispatcherFactory = std::function<std::unique_ptr<TokenDispatcher>(const DispatcherEnv&)>;

struct BlockContext {
  int sequences = 0, seq = 0;
  const void* x = nullptr;  // the caller's input, alive until backward
  Buffer ln1, mean1, rstd1, h, ln2, mean2, rstd2, z, a;
  AttentionContext attention;
  MoEContext moe;  // MoE blocks
  std::vector<WeightTask> weight_tasks;  // a deferred backward's W
};

class TransformerBlock {
 public:
  // `tp`: the tensor-parallel group (nullptr: the whole block on this rank).
  // `dispatcher`: an MoE block's (required there).
  TransformerBlock(const TransformerBlockConfig& cfg, Device& dev, TrackingAllocator& alloc, Communicator* tp = nullptr,
                   const DispatcherFactory& dispatcher = {});
  void init(std::uint64_t seed, const Stream& s);
  void zero_grad(const Stream& s);

  BlockContext forward(const void* x, void* y, int sequences, int seq, const Stream& s);
  // dx from dy. With `defer`, the weight-gradient GEMMs of the attention and the MLP (the
  // zero-bubble schedules' W) are left in c.weight_tasks for backward_weights(); the LayerNorms'
  // and an MoE layer's weight gradients come with the input gradient either way.
  void backward(BlockContext& c, const void* dy, void* dx, const Stream& s, bool defer = false);
  void backward_weights(BlockContext& c, const Stream& s);

  const TransformerBlockConfig& config() const { return cfg_; }
  // Times its parts into `b` (null: none): ln.fwd and ln.bwd (each LayerNorm with its residual
  // add), the attention's ranges (CausalSelfAttention::set_breakdown) inside attention.fwd and
  // attention.bwd; ffn.fwd, ffn.bwd and ffn.wgrad (a dense block's MLP) and ffn.allreduce (its g,
  // with TP); moe.fwd and moe.bwd (an MoE block's layer, its weight gradients included, with the
  // layer's own moe.* ranges inside).
  void set_breakdown(Breakdown* b) {
    breakdown_ = b;
    attn_.set_breakdown(b);
  }
  // The factor the model's loss is scaled by (GptStage::set_loss_scale), for an MoE block's aux loss.
  void set_loss_scale(float scale) {
    if (moe_) moe_->gate().set_loss_scale(scale);
  }
  // Why `cfg` cannot be split over `tp_size` ranks, naming the option; nullopt if it can.
  static std::optional<std::string> validate(const TransformerBlockConfig& cfg, int tp_size);
  CausalSelfAttention& attention() { return attn_; }
  // Every parameter and its gradient, in a fixed order (for optimizers and checks), and the same
  // with each one's dtype (the LayerNorms' and the gate's fp32, the rest the block's).
  std::vector<std::pair<Buffer*, Buffer*>> parameters();
  std::vector<TrainedParameter> trained_parameters();
  // An MoE block's gate and experts (empty for a dense block).
  std::vector<std::pair<Buffer*, Buffer*>> moe_parameters();
  // Whether its MoE layer's step reads expert counts on the host (then no graph can hold it).
  bool reads_host_counts() const { return moe_ && moe_->dispatcher().reads_host_counts(); }

 private:
  TransformerBlockConfig cfg_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Communicator* tp_;
  int tp_rank_ = 0, tp_size_ = 1, ffn_local_ = 0;
  CausalSelfAttention attn_;
  std::unique_ptr<MoELayer> moe_;
  Breakdown* breakdown_ = nullptr;
  Buffer g1_, b1_, g2_, b2_, w1_, w2_;
  Buffer dg1_, db1_, dg2_, db2_, dw1_, dw2_;
};

}  // namespace moebench
