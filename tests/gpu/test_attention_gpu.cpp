// Blocked causal attention on the GPU against the CPU: its panel ops in every dtype (long rows
// and panels that start mid-sequence included), the head-major swap, and the attention layer -- blocked, the GPU's
// default, and materialized, the selectable path -- against the CPU's materialized reference at
// sequence lengths 64, 127, 128 and 2048, outputs and every gradient.
#include <gtest/gtest.h>
#include <string>
#include "gpu_test_util.h"
#include "kernels/attention_panels.h"
#include <cstdlib>
#include <initializer_list>
#include <fstream>
#include "kernels/sdpa.h"
#include "kernels/swap_dims.h"
#include "gpt/attention.h"
#include "gpt/typed_upload.h"

namespace moebench {
using namespace gputest;

namespace {

TEST(GpuAttentionPanels, ForwardBackwardAndRowDotMatchCpuInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Exec ex = dev.exec(dev.default_stream());
  const int heads = 3, seq = 2100;
  struct Case { int rows, row0, cols, col0; };
  // A forward panel from row 0, one mid-sequence, one a key panel of the backward (rows from its
  // first key to the end), and one row panel against every key.
  for (const Case c : {Case{5, 0, 5, 0}, Case{128, 1000, 1128, 0}, Case{2100 - 1920, 1920, 128, 1920}, Case{77, 2023, 2100, 0}})
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE("panel rows " + std::to_string(c.row0) + "+" + std::to_string(c.rows) + ", keys " + std::to_string(c.col0) +
                   "+" + std::to_string(c.cols) + ", " + std::string(dtype_name(t)));
      const AttentionPanel p{heads, c.rows, c.cols, c.row0, c.col0, seq, 0.125f};
      const std::size_t n = std::size_t(heads) * c.rows * c.cols, rows = std::size_t(heads) * seq;
      const auto scores = random_rounded(n, t, 31, 8.f), dp = random_rounded(n, t, 32);
      // Statistics a forward could have left (about log of a row's length), and row dots.
      std::vector<float> stats = random_rounded(rows, DType::f32, 33), delta = random_rounded(rows, DType::f32, 34);
      for (float& l : stats) l += 4.f;
      Buffer gstats = upload(dev, alloc, stats, DType::f32), gdelta = upload(dev, alloc, delta, DType::f32);
      Buffer gs = upload(dev, alloc, scores, t), gdp = upload(dev, alloc, dp, t);
      if (c.col0 == 0 && c.cols >= c.row0 + c.rows) {  // a forward panel: statistics from its rows
        std::vector<float> s = scores;
        attention_panel_softmax_forward_cpu(p, s.data(), stats.data());
        attention_panel_softmax_forward(ex, p, gs.data(), static_cast<float*>(gstats.data()), t);
        EXPECT_LT(rel_l2(download(dev, alloc, gs, n, t), s), kernel_tolerance(t));
        EXPECT_LT(rel_l2(download(dev, alloc, gstats, rows, DType::f32), stats), 1e-5);
        gs = upload(dev, alloc, scores, t);  // the backward recomputes from the scores
      }
      std::vector<float> s = scores, d = dp;
      attention_panel_softmax_backward_cpu(p, s.data(), d.data(), stats.data(), delta.data());
      attention_panel_softmax_backward(ex, p, gs.data(), gdp.data(), static_cast<const float*>(gstats.data()),
                                       static_cast<const float*>(gdelta.data()), t);
      EXPECT_LT(rel_l2(download(dev, alloc, gs, n, t), s), kernel_tolerance(t));
      EXPECT_LT(rel_l2(download(dev, alloc, gdp, n, t), d), kernel_tolerance(t));
    }
  for (DType t : {DType::f32, DType::bf16}) {
    const int sequences = 2, rseq = 37, d = 72, ld = heads * d + 5;
    const std::size_t n = std::size_t(sequences) * rseq * ld;
    const auto g = random_rounded(n, t, 35), o = random_rounded(n, t, 36);
    std::vector<float> want(std::size_t(sequences) * heads * rseq);
    attention_row_dot_cpu(sequences, rseq, heads, d, ld, g.data(), o.data(), want.data());
    Buffer gg = upload(dev, alloc, g, t), go = upload(dev, alloc, o, t);
    Buffer got = alloc.allocate(want.size() * 4, MemTag::temporary);
    attention_row_dot(ex, sequences, rseq, heads, d, ld, gg.data(), go.data(), static_cast<float*>(got.data()), t);
    EXPECT_LT(rel_l2(download(dev, alloc, got, want.size(), DType::f32), want), 1e-5) << dtype_name(t);
  }
}

// The head-major swap on the GPU equals the CPU's for widths of 16-, 4-, 2- and 1-byte units.
TEST(GpuSwapDims, EqualsTheCpuForEveryCopyUnit) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Exec ex = dev.exec(dev.default_stream());
  for (int width_bytes : {128, 12, 6, 3}) {
    const int outer = 37, inner = 48;
    const std::size_t n = std::size_t(outer) * inner * width_bytes;
    std::vector<unsigned char> src(n), want(n), got(n);
    for (std::size_t i = 0; i < n; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
    swap_dims_cpu(outer, inner, std::size_t(width_bytes), src.data(), want.data());
    Buffer a = alloc.allocate(n, MemTag::temporary), b = alloc.allocate(n, MemTag::temporary);
    dev.copy_to_device(a.data(), src.data(), n, dev.default_stream());
    swap_dims(ex, outer, inner, width_bytes, 1, a.data(), b.data());
    dev.copy_to_host(got.data(), b.data(), n, dev.default_stream());
    dev.default_stream().synchronize();
    EXPECT_EQ(got, want) << width_bytes << "-byte vectors";
  }
}

struct LayerResult {
  std::vector<float> y, dx, dwqkv, dwo;
};

LayerResult run_layer(Device& dev, AttentionKernel kernel, DType t, int sequences, int seq, int heads, int d) {
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream& s = dev.default_stream();
  AttentionConfig cfg{heads * d, heads, d, 0, 2, t};
  cfg.kernel = kernel;
  CausalSelfAttention attn(cfg, dev, alloc);
  attn.init(17, s);
  const std::size_t n = std::size_t(sequences) * seq * cfg.hidden, es = dtype_size(t);
  Buffer x = alloc.allocate(n * es, MemTag::activations), y = alloc.allocate(n * es, MemTag::activations),
         dy = alloc.allocate(n * es, MemTag::activations), dx = alloc.allocate(n * es, MemTag::activations);
  upload_as(dev, x.data(), random_rounded(n, t, 41, 2.f), t, s);
  upload_as(dev, dy.data(), random_rounded(n, t, 42), t, s);
  AttentionContext c = attn.forward(x.data(), y.data(), sequences, seq, s);
  attn.backward(c, dy.data(), dx.data(), s);
  s.synchronize();
  const std::size_t wq = attn.wqkv_grad().bytes() / es, wo = attn.wo_grad().bytes() / es;
  return {download(dev, alloc, y, n, t), download(dev, alloc, dx, n, t), download(dev, alloc, attn.wqkv_grad(), wq, t),
          download(dev, alloc, attn.wo_grad(), wo, t)};
}

// Each of `kernels` on this GPU against the CPU's materialized layer, at each sequence length
// (64, 127, 128 and 2048 unless told) in each of `types`.
void expect_matches_the_cpu(Device& gpu, std::initializer_list<AttentionKernel> kernels, std::initializer_list<DType> types,
                            std::initializer_list<int> lengths = {64, 127, 128, 2048}) {
  Device cpu = Device::open(Backend::cpu);
  for (int seq : lengths)
    for (DType t : types) {
      SCOPED_TRACE("seq " + std::to_string(seq) + ", " + std::string(dtype_name(t)));
      const int sequences = seq > 128 ? 1 : 2, heads = 2, d = 64;
      const LayerResult want = run_layer(cpu, AttentionKernel::materialized, t, sequences, seq, heads, d);
      // fp32 runs on TF32 tensor cores; 16-bit stores P, dP and the projections rounded.
      const double tol = t == DType::f32 ? 20 * kTf32Epsilon : 4 * kernel_tolerance(t);
      for (AttentionKernel k : kernels) {
        SCOPED_TRACE(attention_kernel_name(k));
        const LayerResult got = run_layer(gpu, k, t, sequences, seq, heads, d);
        EXPECT_LT(rel_l2(got.y, want.y), tol);
        EXPECT_LT(rel_l2(got.dx, want.dx), tol);
        EXPECT_LT(rel_l2(got.dwqkv, want.dwqkv), tol);
        EXPECT_LT(rel_l2(got.dwo, want.dwo), tol);
      }
    }
}

TEST(GpuBlockedAttention, MatchesTheCpuReferenceAtSequenceLengths64To2048) {
  MOEBENCH_REQUIRE_GPU(gpu);
  if (gpu.backend() == Backend::cuda) {  // (the tests' logic on the CPU has the CPU's default)
    TrackingAllocator probe(Backend::cuda, gpu.default_stream());
    CausalSelfAttention def({64, 1, 64, 0, 0, DType::bf16}, gpu, probe);
    EXPECT_EQ(def.kernel(), AttentionKernel::blocked) << "the GPU's default keeps no [seq, seq] tensor";
  }
  expect_matches_the_cpu(gpu, {AttentionKernel::blocked, AttentionKernel::materialized}, {DType::f32, DType::bf16});
}

// cuDNN's fused attention against the CPU's materialized layer: the engines' graph accepted,
// causal, and its statistics carried from forward to backward, at odd and long sequences. fp16
// at one odd length only: each shape costs a plan, and a plan may compile kernels at run time.
TEST(GpuFusedAttention, MatchesTheCpuReferenceAtSequenceLengths64To2048) {
  MOEBENCH_REQUIRE_GPU(gpu);
  if (!sdpa_cudnn_built()) GTEST_SKIP() << "this build has no cuDNN";
  expect_matches_the_cpu(gpu, {AttentionKernel::cudnn}, {DType::bf16});
  expect_matches_the_cpu(gpu, {AttentionKernel::cudnn}, {DType::f16}, {127});
}

// This GPU's properties as cuDNN serializes them, and the deviceless check (CudnnDeviceless, run
// on CPU machines from a written description of an H100) agreeing with it here. A lease keeps the
// serialization (MOEBENCH_CUDNN_DEVICE_JSON_OUT) to replace that description.
TEST(GpuFusedAttention, TheDevicelessCheckAgreesWithThisGpu) {
  MOEBENCH_REQUIRE_GPU(gpu);
  if (!sdpa_cudnn_built()) GTEST_SKIP() << "this build has no cuDNN";
  const std::string json = sdpa_cudnn_device_json();
  ASSERT_FALSE(json.empty());
  if (const char* out = std::getenv("MOEBENCH_CUDNN_DEVICE_JSON_OUT")) std::ofstream(out) << json << "\n";
  SdpaShape s;
  s.sequences = 2, s.heads = 16, s.seq = 2048, s.head_dim = 64, s.t = DType::bf16, s.scale = 0.125f;
  s.strides = {2048 * 3072, 64, 3072, 1};
  s.o_strides = {2048 * 1024, 64, 1024, 1};
  EXPECT_FALSE(sdpa_cudnn_engines(sdpa_forward_graph(s), json).empty());
  EXPECT_FALSE(sdpa_cudnn_engines(sdpa_backward_graph(s), json).empty());
}

}  // namespace
}  // namespace moebench
