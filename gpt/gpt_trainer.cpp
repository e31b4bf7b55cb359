#include "gpt/gpt_trainer.h"
#include <set>

namespace moebench {

GptTrainer::GptTrainer(Communicator& world, Device& dev, Backend backend, const ParallelLayout& layout, const GptConfig& model,
                       int sequences, int micro_batches)
    : layout_(layout), groups_(make_layout_groups(world, layout)),
      alloc_(std::make_unique<TrackingAllocator>(backend, dev.default_stream())), compute_(dev.create_stream("compute")),
      send_(dev.create_stream("send")), micro_(layout.pp > 1 ? micro_batches : 1) {
  stage_ = std::make_unique<GptStage>(model, groups_.stage, layout.pp, dev, *alloc_, layout.tp > 1 ? groups_.tp.get() : nullptr,
                                      layout_dispatcher(layout, groups_));
  stage_->init(1, compute_);
  engine_ = std::make_unique<PipelineEngine>(*stage_, *groups_.pp, dev, *alloc_, compute_, send_);
  // Data parallelism sums the gradients over the DP group, except what the layer summed
  // itself: DPMoE's gate (over its all-to-all, the DP group) and experts (each rank its own).
  // fp16/bf16 parameters get fp32 masters there.
  std::set<Buffer*> moe_set;
  for (auto& p : stage_->moe_parameters()) moe_set.insert(p.first);
  std::vector<TrainedParameter> dense, moe;
  for (const TrainedParameter& p : stage_->trained_parameters()) (moe_set.count(p.weight) ? moe : dense).push_back(p);
  AdamStep hyper;
  hyper.lr = 1e-4f;
  dense_opt_ = std::make_unique<DataParallelAdam>(dense, groups_.dp.get(), layout.zero, hyper, dev, *alloc_);
  if (!moe.empty())
    moe_opt_ = std::make_unique<DataParallelAdam>(moe, layout.kind == LayoutKind::dpmoe ? nullptr : groups_.dp.get(), false,
                                                  hyper, dev, *alloc_);
  // This DP rank's sequences, in micro-batches of synthetic tokens (the same on any rank count).
  const int per_micro = sequences / layout.dp / micro_, d = groups_.dp_rank;
  rows_ = per_micro * model.seq;
  tokens_ = sequences * model.seq;
  std::vector<const std::int32_t*> tok, tgt;
  for (int j = 0; j < micro_; ++j) {
    tokens_buf_.push_back(synthetic_tokens(dev, *alloc_, compute_, rows_, model.vocab, 7, 1000 * d + j));
    targets_buf_.push_back(synthetic_tokens(dev, *alloc_, compute_, rows_, model.vocab, 8, 1000 * d + j));
    tok.push_back(tokens_buf_.back().as<std::int32_t>());
    tgt.push_back(targets_buf_.back().as<std::int32_t>());
  }
  // fp16: the loss summed over the tokens rather than averaged -- scaled by the token count, its
  // aux losses too (gradients of 1 / tokens each would flush to zero in fp16) -- and the
  // optimizer dividing the fp32 gradients back.
  const bool loss_scaled = model.dtype == DType::f16;
  stage_->set_batch(tok, tgt, per_micro, loss_scaled ? 1.f : 1.f / float(tokens_));
  if (loss_scaled) {
    stage_->set_loss_scale(float(tokens_));
    dense_opt_->set_gradient_scale(1.f / float(tokens_));
    if (moe_opt_) moe_opt_->set_gradient_scale(1.f / float(tokens_));
  }
}

void GptTrainer::step() {
  if (graph_) return graph_->replay(compute_);
  enqueue_step();
}

void GptTrainer::capture_step() {
  if (graph_) throw Error("GptTrainer: the step is captured already");
  if (stage_->reads_host_counts())
    throw Error("GptTrainer: this step's MoE blocks cannot be captured into a graph: their gates read the expert counts "
                "on the host and the expert GEMMs' shapes follow them (--expert-gemm segmented keeps them on the device)");
  enqueue_step();
  send_.synchronize();
  compute_.synchronize();
  alloc_->trim();  // the eager step's cached blocks: the graph takes blocks of its own
  alloc_->reset_peaks();
  graph_ = std::make_unique<StreamGraph>(*alloc_, compute_, [this] { enqueue_step(); });
  captured_peak_ = alloc_->peak_total();
}

void GptTrainer::set_breakdown(Breakdown* b) {
  if (graph_ && b) throw Error("GptTrainer: the step is captured: a replayed step times nothing (time eager steps)");
  breakdown_ = b;
  stage_->set_breakdown(b);
}

void GptTrainer::enqueue_step() {
  ScopedRange whole("gpt.step", compute_, breakdown_);
  {
    ScopedRange r("step.zero_grad", compute_, breakdown_);
    stage_->zero_grad(compute_);
  }
  // Enqueued only: nothing in a step waits on the host, but the gates of MoE blocks whose experts
  // take host counts (all routes but segmented).
  engine_->enqueue_step(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, layout_.pp, micro_), rows_);
  stage_->sync_tied_embedding(*groups_.pp, compute_);
  ScopedRange r("step.optimizer", compute_, breakdown_);
  dense_opt_->step(compute_);
  if (moe_opt_) moe_opt_->step(compute_);
}

long long GptTrainer::expert_rows() const {
  long long rows = 0;
  for (int m = 0; m < micro_; ++m) rows += stage_->expert_rows(m);
  return rows;
}

long long GptTrainer::expert_computed_rows() const {
  long long rows = 0;
  for (int m = 0; m < micro_; ++m) rows += stage_->expert_computed_rows(m);
  return rows;
}

}  // namespace moebench
