// A pipeline stage of the decoder-only model: a contiguous run of its blocks, with the token and
// position embeddings on the first stage and the final LayerNorm, the output layer (tied to the
// token embedding) and the cross-entropy on the last. The first and last stages each hold the
// token embedding; sync_tied_embedding() sums their gradients (Megatron's embedding group).
// Stages take their micro-batches' tokens and targets from set_batch(). The backward's B leaves
// every weight-gradient GEMM to W -- the blocks' attention and MLP, the tied output layer's --
// and keeps what they read until then; the LayerNorms' and the embedding lookups' gradients
// (reductions, no GEMM) and the MoE layers' come with B.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "models/model_shape.h"
#include "pipeline/pipeline_stage.h"
#include "gpt/transformer_block.h"

namespace moebench {

struct GptConfig {
  int vocab = 0, seq = 0, hidden = 0, heads = 0, ffn = 0, layers = 0;
  // MoE: with moe_every = k > 0, layers k - 1, 2k - 1, ... are MoE blocks (k = 2: PPMoE's every
  // other FFN) of `moe` (its hidden is the model's).
  int moe_every = 0;
  MoEConfig moe;
  // Initial std of the token and position embeddings (GPT-2's 0.02; the finite-difference tests
  // take larger ones, where a probe of 1e-2 is small against the weights).
  float token_std = 0.02f, position_std = 0.02f;
  // Weights, gradients and activations (fp16/bf16: fp32 arithmetic; the LayerNorms' parameters,
  // the MoE gates and the loss stay fp32; the optimizer keeps fp32 masters).
  DType dtype = DType::f32;
  AttentionKernel attention = AttentionKernel::by_backend;
  int attention_panel_rows = 512;  // blocked attention's (AttentionConfig::panel_rows)
  bool is_moe(int layer) const { return moe_every > 0 && layer % moe_every == moe_every - 1; }
};

// The model of `shape` (an MoE block, top-k inside its prototypes, in place of every
// shape.moe_every-th FFN when it has experts), its weights and activations in `dtype`; the MoE
// blocks' implementation (gate, expert GEMMs, aux loss) at MoEConfig's defaults.
GptConfig gpt_config(const ModelShape& shape, DType dtype = DType::f32);

class GptStage final : public PipelineStage {
 public:
  // Stage `stage` of `stages` (layers split evenly; validate() says when they cannot be).
  // `tp`: the tensor-parallel group of its blocks (nullptr: none).
  // `dispatcher`: the MoE blocks' (required when the model has any).
  GptStage(const GptConfig& cfg, int stage, int stages, Device& dev, TrackingAllocator& alloc, Communicator* tp = nullptr,
           const DispatcherFactory& dispatcher = {});
  static std::optional<std::string> validate(const GptConfig& cfg, int stages, int tp_size);
  void init(std::uint64_t seed, const Stream& s);
  void zero_grad(const Stream& s);

  // Micro-batch j: tokens[j] and targets[j], [sequences x seq] int32 on the device (first stage:
  // tokens; last stage: targets; the others: neither is read). Each token's loss is scaled by
  // grad_scale in the gradient (1 / tokens of the mini-batch for the mean).
  void set_batch(std::vector<const std::int32_t*> tokens, std::vector<const std::int32_t*> targets, int sequences,
                 float grad_scale);

  int width() const override { return cfg_.hidden; }
  DType activation_dtype() const override { return cfg_.dtype; }
  void forward(int micro, const void* x, void* y, int rows, const Stream& s) override;
  void backward_input(int micro, const void* dy, void* dx, const Stream& s) override;
  void backward_weight(int micro, const Stream& s) override;

  // With recomputation a micro-batch keeps only the stage's input (and, on the last stage, its
  // output layer's gradient) from forward to backward, which runs the blocks' forward again.
  void set_recompute(bool on) { recompute_ = on; }
  // The factor the loss is scaled by beyond set_batch's grad_scale's 1 / tokens (fp16 training
  // passes grad_scale = scale / tokens so its gradients stay representable, and divides them
  // back in fp32): the MoE blocks' aux losses are scaled alike.
  void set_loss_scale(float scale) {
    for (auto& b : blocks_) b->set_loss_scale(scale);
  }
  // Times its parts into `b` (null: none): model.fwd, model.bwd and model.wgrad, and inside them
  // embed.*, head.* (the final LayerNorm, the tied output layer and the loss) and the blocks'
  // ranges (TransformerBlock::set_breakdown).
  void set_breakdown(Breakdown* b);
  // Last stage: the sum of the token losses of the micro-batches since zero_grad (waits for s).
  double loss_sum(const Stream& s);
  // Collective over the pipeline's ranks: the first and last stages add up their token
  // embedding's gradients (every rank calls it; a one-stage pipeline has nothing to add).
  void sync_tied_embedding(Communicator& pipeline, const Stream& s);
  // Every parameter this stage holds and its gradient: token and position embeddings (first),
  // its blocks, the final LayerNorm (last), the token embedding again on a last stage that is
  // not also the first.
  std::vector<std::pair<Buffer*, Buffer*>> parameters();
  // The same with each one's dtype, for the optimizer.
  std::vector<TrainedParameter> trained_parameters();
  // The token rows this rank's experts computed in micro-batch `micro`'s last forward, over its
  // MoE blocks (how routing spread the load: the busiest rank sets the step's pace); kept after
  // the backward frees the forward's contexts.
  long long expert_rows(int micro) const;
  // The rows their expert GEMMs computed for them: with --expert-gemm padded the blocks' padding
  // too (moe/padded_blocks.h); the same as expert_rows() for the routes that compute the rows alone.
  long long expert_computed_rows(int micro) const;
  // The MoE blocks' gates and experts among them.
  std::vector<std::pair<Buffer*, Buffer*>> moe_parameters();
  // Whether some MoE block's step reads expert counts on the host.
  bool reads_host_counts() const;
  int config_seq() const { return cfg_.seq; }
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }

 private:
  struct Micro {
    std::vector<Buffer> xs;  // each block's input, then the last block's output
    std::vector<BlockContext> blocks;
    Buffer lnf, mean, rstd, dlogits;
    long long expert_rows = 0;  // its MoE blocks' rows on this rank's experts, last forward (0 where they stay on the device)
    long long expert_computed_rows = 0;  // the rows their GEMMs computed, padding included
  };
  GptConfig cfg_;
  int stage_, stages_, first_layer_, layers_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer table_, positions_, gf_, bf_, dtable_, dpositions_, dgf_, dbf_;
  std::vector<Buffer> losses_;  // per micro-batch since zero_grad (last stage)
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::vector<const std::int32_t*> tokens_, targets_;
  int sequences_ = 0;
  float grad_scale_ = 1.f;
  std::vector<Micro> micro_;
  Breakdown* breakdown_ = nullptr;
  bool recompute_ = false;
  void run_blocks(Micro& m, const Stream& s);  // xs[1..], the blocks' contexts from xs[0]
  void forget_blocks(Micro& m);
};

}  // namespace moebench
