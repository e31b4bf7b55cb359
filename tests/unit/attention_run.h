// One attention layer's forward and backward on the CPU through a chosen kernel, and the
// comparison of two such runs: shared by the attention kernels' tests.
#pragma once
#include <gtest/gtest.h>
#include <optional>
#include <string>
#include <vector>
#include "moe_test_util.h"
#include "gpt/attention.h"
#include "gpt/gpt_model.h"
#include "gpt/typed_upload.h"
#include "timeline_util.h"

namespace moebench::testing_util {

// One attention layer's forward and backward on the CPU, its results widened to fp32.
struct AttentionRun {
  std::vector<float> y, dx, dwqkv, dwo;
  AttentionContext kept;  // what the forward kept (before the backward released it)
  std::size_t kept_probs = 0, kept_stats = 0;
};

inline AttentionRun run_attention(AttentionKernel kernel, int panel_rows, DType t, int sequences, int seq, int heads = 3, int d = 4,
                                  bool record = false, std::vector<TimelineEntry>* forward_ops = nullptr) {
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  const Stream s = record ? dev.create_stream("attention") : dev.default_stream();
  AttentionConfig cfg{heads * d + 2, heads, d, 0, 1, t};
  cfg.kernel = kernel;
  cfg.panel_rows = panel_rows;
  CausalSelfAttention attn(cfg, dev, alloc);
  attn.init(11, s);
  const int T = sequences * seq, H = cfg.hidden;
  const std::size_t es = dtype_size(t), n = std::size_t(T) * H;
  Buffer x = alloc.allocate(n * es, MemTag::activations), y = alloc.allocate(n * es, MemTag::activations),
         dy = alloc.allocate(n * es, MemTag::activations), dx = alloc.allocate(n * es, MemTag::activations);
  upload_as(dev, x.data(), testing_util::normals(n, 21, 2.f), t, s);  // large enough that the softmax rows are far from uniform
  upload_as(dev, dy.data(), testing_util::normals(n, 22), t, s);
  AttentionRun r;
  std::optional<testing_util::RecordedTimeline> timeline;
  if (forward_ops) timeline.emplace();
  AttentionContext c = attn.forward(x.data(), y.data(), sequences, seq, s);
  s.synchronize();
  if (forward_ops) *forward_ops = timeline->entries();
  timeline.reset();
  r.kept_probs = c.probs.bytes();
  r.kept_stats = c.stats.bytes();
  attn.backward(c, dy.data(), dx.data(), s);
  s.synchronize();
  r.y = host_values(y, t);
  r.dx = host_values(dx, t);
  r.dwqkv = host_values(attn.wqkv_grad(), t);
  r.dwo = host_values(attn.wo_grad(), t);
  return r;
}

inline void expect_close(const AttentionRun& got, const AttentionRun& want, double tol, const std::string& what) {
  EXPECT_LT(rel_l2(got.y.data(), want.y.data(), want.y.size()), tol) << what << ": y";
  EXPECT_LT(rel_l2(got.dx.data(), want.dx.data(), want.dx.size()), tol) << what << ": dx";
  EXPECT_LT(rel_l2(got.dwqkv.data(), want.dwqkv.data(), want.dwqkv.size()), tol) << what << ": dWqkv";
  EXPECT_LT(rel_l2(got.dwo.data(), want.dwo.data(), want.dwo.size()), tol) << what << ": dWo";
}

// A GPT step through `kernel` (`heads` heads of width 16 / heads) gives the materialized model's
// loss and gradients.
inline void expect_same_gpt_step(AttentionKernel kernel, int heads) {
  auto run = [heads](AttentionKernel k) {
    Device dev = Device::open(Backend::cpu);
    TrackingAllocator alloc(Backend::cpu);
    GptConfig cfg = gpt_config({.layers = 2, .hidden = 16, .ffn = 32, .heads = heads, .seq = 7, .vocab = 13});
    cfg.attention = k;
    GptModel model(cfg, dev, alloc);
    model.init(3, dev.default_stream());
    const int sequences = 3, T = sequences * cfg.seq;
    const auto tokens = token_ids(T, cfg.vocab, 1), targets = token_ids(T, cfg.vocab, 2);
    std::vector<float> out = {float(model.forward_backward(tokens.data(), targets.data(), sequences, 1.f / T, dev.default_stream()))};
    for (auto& [w, g] : model.parameters()) out.insert(out.end(), g->as<float>(), g->as<float>() + g->bytes() / 4);
    return out;
  };
  const auto want = run(AttentionKernel::materialized), got = run(kernel);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_NEAR(got[0], want[0], 1e-5 * std::abs(want[0]));
  EXPECT_LT(rel_l2(got.data() + 1, want.data() + 1, want.size() - 1), 1e-5);
}

}  // namespace moebench::testing_util
