// The transformer's new ops on the GPU against their CPU references, in every dtype, at sizes
// that are not multiples of the block sizes: LayerNorm (with accumulated parameter gradients),
// the causal softmax (masked entries exactly 0) and the cross-entropy (in place as well).
#include <gtest/gtest.h>
#include <string>
#include "gpu_test_util.h"
#include "kernels/causal_softmax.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/layernorm.h"

namespace moebench {
using namespace gputest;

namespace {

TEST(GpuLayerNorm, ForwardAndBackwardMatchCpuInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  // A warp per row holding it in registers (1000: 8 groups of four a lane, the last partly
  // empty; 64: one, half the lanes idle), and a block per row (1026: not by fours; 2048: too long
  // for a warp's registers).
  for (const LayerNormShape s : {LayerNormShape{37, 1000}, LayerNormShape{50, 64}, LayerNormShape{9, 1026},
                                 LayerNormShape{4, 2048}})
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE("cols " + std::to_string(s.cols));
    const std::size_t n = std::size_t(s.rows) * s.cols;
    auto x = random_rounded(n, t, 11, 2.f), dy = random_rounded(n, t, 12);
    for (auto& v : x) v = round_to(t, v + 1.f);
    const auto gamma = random_rounded(s.cols, DType::f32, 13), beta = random_rounded(s.cols, DType::f32, 14);
    const auto dgamma0 = random_rounded(s.cols, DType::f32, 15), dbeta0 = random_rounded(s.cols, DType::f32, 16);
    std::vector<float> y(n), mean(s.rows), rstd(s.rows), dx(n), dgamma = dgamma0, dbeta = dbeta0;
    layernorm_forward_cpu(s, x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data());
    layernorm_backward_cpu(s, x.data(), dy.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(), dbeta.data());
    Buffer gx = upload(dev, alloc, x, t), gdy = upload(dev, alloc, dy, t), gy = upload(dev, alloc, std::vector<float>(n, NAN), t),
           gdx = upload(dev, alloc, std::vector<float>(n, NAN), t);
    Buffer ggamma = upload(dev, alloc, gamma, DType::f32), gbeta = upload(dev, alloc, beta, DType::f32),
           gmean = upload(dev, alloc, std::vector<float>(s.rows, NAN), DType::f32),
           grstd = upload(dev, alloc, std::vector<float>(s.rows, NAN), DType::f32),
           gdgamma = upload(dev, alloc, dgamma0, DType::f32), gdbeta = upload(dev, alloc, dbeta0, DType::f32);
    const Exec ex = dev.exec(dev.default_stream());
    layernorm_forward(ex, s, gx.data(), ggamma.as<float>(), gbeta.as<float>(), gy.data(), gmean.as<float>(), grstd.as<float>(), t);
    layernorm_backward(ex, s, gx.data(), gdy.data(), ggamma.as<float>(), gmean.as<float>(), grstd.as<float>(), gdx.data(),
                       gdgamma.as<float>(), gdbeta.as<float>(), t);
    EXPECT_LT(rel_l2(download(dev, alloc, gy, n, t), y), kernel_tolerance(t)) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gmean, s.rows, DType::f32), mean), 1e-5) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, grstd, s.rows, DType::f32), rstd), 1e-5) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gdx, n, t), dx), kernel_tolerance(t)) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gdgamma, s.cols, DType::f32), dgamma), 1e-4) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gdbeta, s.cols, DType::f32), dbeta), 1e-4) << dtype_name(t);
  }
}

// Rows cached in shared memory (77, 2048: forward and backward), the backward's long-row path
// (3000: its two fp32 rows exceed 16 KiB) and both long-row paths (4200).
TEST(GpuCausalSoftmax, ForwardAndBackwardMatchCpuInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (const CausalSoftmaxShape s : {CausalSoftmaxShape{5, 77, 0.125f}, CausalSoftmaxShape{1, 2048, 0.125f},
                                     CausalSoftmaxShape{1, 3000, 0.125f}, CausalSoftmaxShape{1, 4200, 0.125f}})
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE("seq " + std::to_string(s.seq));
    const std::size_t n = std::size_t(s.matrices) * s.seq * s.seq;
    const auto scores = random_rounded(n, t, 21, 8.f), dp = random_rounded(n, t, 22);
    std::vector<float> p(n), ds(n);
    causal_softmax_forward_cpu(s, scores.data(), p.data());
    std::vector<float> p_rounded = p;
    round_to(t, p_rounded.data(), n);  // the GPU's backward reads its stored (rounded) probabilities
    causal_softmax_backward_cpu(s, p_rounded.data(), dp.data(), ds.data());
    Buffer gs = upload(dev, alloc, scores, t), gp = upload(dev, alloc, std::vector<float>(n, NAN), t),
           gdp = upload(dev, alloc, dp, t);
    const Exec ex = dev.exec(dev.default_stream());
    causal_softmax_forward(ex, s, gs.data(), gp.data(), t);
    causal_softmax_backward(ex, s, gp.data(), gdp.data(), gdp.data(), t);  // in place
    const auto got_p = download(dev, alloc, gp, n, t);
    EXPECT_LT(rel_l2(got_p, p), kernel_tolerance(t)) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gdp, n, t), ds), kernel_tolerance(t)) << dtype_name(t);
    int future = 0;
    for (std::size_t r = 0; r < std::size_t(s.matrices) * s.seq; ++r)
      for (int j = int(r % s.seq) + 1; j < s.seq; ++j) future += got_p[r * s.seq + j] != 0.f;
    EXPECT_EQ(future, 0) << dtype_name(t) << ": probability on a future position";
  }
}

TEST(GpuCrossEntropy, LossesAndGradientMatchCpuInEveryDtypeAlsoInPlace) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (const CrossEntropyShape s : {CrossEntropyShape{23, 5001, 1.f / 23}, CrossEntropyShape{23, 5000, 1.f / 23}})
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {  // one logit a load, then four
    SCOPED_TRACE("vocab " + std::to_string(s.vocab));
    const std::size_t n = std::size_t(s.rows) * s.vocab;
    std::vector<std::int32_t> targets(s.rows);
    for (int r = 0; r < s.rows; ++r) targets[r] = (r * 977 + 3) % s.vocab;
    const auto logits = random_rounded(n, t, 31, 3.f);
    std::vector<float> losses(s.rows), d(n);
    cross_entropy_cpu(s, logits.data(), targets.data(), losses.data(), d.data());
    Buffer gl = upload(dev, alloc, logits, t), gloss = upload(dev, alloc, std::vector<float>(s.rows, NAN), DType::f32);
    Buffer gt = alloc.allocate(targets.size() * 4, MemTag::activations);
    dev.copy_to_device(gt.data(), targets.data(), targets.size() * 4, dev.default_stream());
    cross_entropy(dev.exec(dev.default_stream()), s, gl.data(), gt.as<std::int32_t>(), gloss.as<float>(), gl.data(), t);
    EXPECT_LT(rel_l2(download(dev, alloc, gloss, s.rows, DType::f32), losses), 1e-5) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, gl, n, t), d), kernel_tolerance(t)) << dtype_name(t);
  }
}

TEST(GpuEmbedding, ForwardAndAccumulatedBackwardMatchCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const EmbeddingShape s{300, 30, 77, 41};
  std::vector<std::int32_t> tokens(s.rows);
  for (int r = 0; r < s.rows; ++r) tokens[r] = (r * 7 + r / 5) % s.vocab;  // repeats: the backward adds
  const auto table = random_rounded(std::size_t(s.vocab) * s.hidden, DType::f32, 41),
             pos = random_rounded(std::size_t(s.seq) * s.hidden, DType::f32, 42),
             dy = random_rounded(std::size_t(s.rows) * s.hidden, DType::f32, 43),
             dtable0 = random_rounded(table.size(), DType::f32, 44), dpos0 = random_rounded(pos.size(), DType::f32, 45);
  std::vector<float> y(dy.size()), dtable = dtable0, dpos = dpos0;
  embedding_forward_cpu(s, tokens.data(), table.data(), pos.data(), y.data());
  embedding_backward_cpu(s, tokens.data(), dy.data(), dtable.data(), dpos.data());
  Buffer gt = alloc.allocate(tokens.size() * 4, MemTag::activations);
  dev.copy_to_device(gt.data(), tokens.data(), tokens.size() * 4, dev.default_stream());
  Buffer gtable = upload(dev, alloc, table, DType::f32), gpos = upload(dev, alloc, pos, DType::f32),
         gdy = upload(dev, alloc, dy, DType::f32), gy = upload(dev, alloc, std::vector<float>(dy.size(), NAN), DType::f32),
         gdtable = upload(dev, alloc, dtable0, DType::f32), gdpos = upload(dev, alloc, dpos0, DType::f32);
  const Exec ex = dev.exec(dev.default_stream());
  embedding_forward(ex, s, gt.as<std::int32_t>(), gtable.as<float>(), gpos.as<float>(), gy.as<float>());
  embedding_backward(ex, s, gt.as<std::int32_t>(), gdy.as<float>(), gdtable.as<float>(), gdpos.as<float>());
  EXPECT_EQ(download(dev, alloc, gy, y.size(), DType::f32), y);
  EXPECT_LT(rel_l2(download(dev, alloc, gdtable, dtable.size(), DType::f32), dtable), 1e-6);
  EXPECT_LT(rel_l2(download(dev, alloc, gdpos, dpos.size(), DType::f32), dpos), 1e-6);
}

}  // namespace
}  // namespace moebench
