// The fused attention's operation graphs (kernels/sdpa_graph.h), evaluated on the CPU: the
// forward's O and statistics and the backward's gradients against attention written out in
// double, in the layouts the layer binds (Q, K, V head-major, O and dO as context rows); the
// graphs' mechanism (no [seq, seq] tensor outside the engine, dQ accumulated in a buffer zeroed
// per run); the layer and the GPT step through them against the materialized attention.
#include <gtest/gtest.h>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>
#include "attention_run.h"
#include "kernels/convert.h"
#include "kernels/sdpa.h"

namespace moebench {
using testing_util::AttentionRun;
using testing_util::expect_close;
using testing_util::normals;
using testing_util::rel_l2;
using testing_util::run_attention;
namespace {

// Attention of B sequences x H heads of [n, d] in the layer's layouts, with its reference.
struct Problem {
  int B, H, n, d;
  DType t;
  SdpaShape shape;
  std::vector<float> q, k, v, d_o;  // q, k, v head-major [H, B n, d]; d_o rows [B n, H d]
  std::vector<double> o, stats, dq, dk, dv;  // o rows; stats [B, H, n]; gradients head-major

  Problem(int B_, int H_, int n_, int d_, DType t_) : B(B_), H(H_), n(n_), d(d_), t(t_) {
    const long long T = (long long)B * n;
    shape = {B, H, n, d, {(long long)n * d, T * d, d, 1}, {(long long)n * H * d, d, (long long)H * d, 1}, 1.f / std::sqrt(float(d)), t};
    const std::size_t size = std::size_t(T) * H * d;
    q = normals(size, 1, 1.5f), k = normals(size, 2, 1.5f), v = normals(size, 3), d_o = normals(size, 4);
    for (auto* x : {&q, &k, &v, &d_o}) round_to(t, x->data(), x->size());
    o.assign(size, 0), stats.assign(std::size_t(B) * H * n, 0), dq.assign(size, 0), dk.assign(size, 0), dv.assign(size, 0);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) reference(b, h);
  }
  std::size_t head_major(int b, int h, int i, int c) const { return ((std::size_t(h) * B + b) * n + i) * d + c; }
  std::size_t rows(int b, int h, int i, int c) const { return (std::size_t(b) * n + i) * H * d + std::size_t(h) * d + c; }

  void reference(int b, int h) {
    const double scale = 1.0 / std::sqrt(double(d));
    std::vector<double> p(std::size_t(n) * n, 0), dp(std::size_t(n) * n, 0);
    for (int i = 0; i < n; ++i) {
      double max = -INFINITY, sum = 0;
      for (int j = 0; j <= i; ++j) {
        double s = 0;
        for (int c = 0; c < d; ++c) s += double(q[head_major(b, h, i, c)]) * k[head_major(b, h, j, c)];
        p[i * n + j] = s * scale;
        max = std::max(max, s * scale);
      }
      for (int j = 0; j <= i; ++j) sum += (p[i * n + j] = std::exp(p[i * n + j] - max));
      for (int j = 0; j <= i; ++j) p[i * n + j] /= sum;
      stats[(std::size_t(b) * H + h) * n + i] = max + std::log(sum);
      for (int c = 0; c < d; ++c) {
        double acc = 0;
        for (int j = 0; j <= i; ++j) acc += p[i * n + j] * v[head_major(b, h, j, c)];
        o[rows(b, h, i, c)] = acc;
      }
    }
    for (int i = 0; i < n; ++i) {
      double delta = 0;
      for (int c = 0; c < d; ++c) delta += double(d_o[rows(b, h, i, c)]) * o[rows(b, h, i, c)];
      for (int j = 0; j <= i; ++j) {
        double g = 0;
        for (int c = 0; c < d; ++c) g += double(d_o[rows(b, h, i, c)]) * v[head_major(b, h, j, c)];
        dp[i * n + j] = scale * p[i * n + j] * (g - delta);  // dS
      }
    }
    for (int i = 0; i < n; ++i)
      for (int c = 0; c < d; ++c) {
        double gq = 0, gk = 0, gv = 0;
        for (int j = 0; j < n; ++j) {
          gq += dp[i * n + j] * k[head_major(b, h, j, c)];
          gk += dp[j * n + i] * q[head_major(b, h, j, c)];
          gv += p[j * n + i] * d_o[rows(b, h, j, c)];
        }
        dq[head_major(b, h, i, c)] = gq, dk[head_major(b, h, i, c)] = gk, dv[head_major(b, h, i, c)] = gv;
      }
  }
};

// The graphs, run through the public entry points on the CPU, with fp32 or 16-bit tensors.
struct Outputs {
  std::vector<float> o, stats, dq, dk, dv;
};
Outputs run_graphs(const Problem& p, int backward_runs = 1) {
  const Exec ex;
  const std::size_t es = dtype_size(p.t), size = p.q.size();
  auto stored = [&](const std::vector<float>& x) {
    std::vector<char> out(x.size() * es);
    convert_cpu(x.data(), DType::f32, out.data(), p.t, x.size());
    return out;
  };
  auto widened = [&](const std::vector<char>& x) {
    std::vector<float> out(x.size() / es);
    convert_cpu(x.data(), p.t, out.data(), DType::f32, out.size());
    return out;
  };
  const auto q = stored(p.q), k = stored(p.k), v = stored(p.v), d_o = stored(p.d_o);
  std::vector<char> o(size * es), dq(size * es), dk(size * es), dv(size * es);
  std::vector<float> stats(std::size_t(p.B) * p.H * p.n, NAN);
  sdpa_forward(ex, p.shape, q.data(), k.data(), v.data(), o.data(), stats.data(), nullptr);
  std::vector<char> workspace(sdpa_backward_workspace(ex, p.shape));
  for (int r = 0; r < backward_runs; ++r)
    sdpa_backward(ex, p.shape, q.data(), k.data(), v.data(), o.data(), d_o.data(), stats.data(), dq.data(), dk.data(),
                  dv.data(), workspace.data());
  return {widened(o), stats, widened(dq), widened(dk), widened(dv)};
}

TEST(FusedAttentionGraph, ForwardAndBackwardAreCausalAttentionInFp32) {
  for (int n : {1, 5, 16}) {
    const Problem p(2, 3, n, 8, DType::f32);
    const Outputs r = run_graphs(p);
    SCOPED_TRACE("seq " + std::to_string(n));
    EXPECT_LT(rel_l2(r.o, p.o), 1e-6);
    EXPECT_LT(rel_l2(r.stats, p.stats), 1e-6);
    EXPECT_LT(rel_l2(r.dq, p.dq), 1e-5);
    EXPECT_LT(rel_l2(r.dk, p.dk), 1e-5);
    EXPECT_LT(rel_l2(r.dv, p.dv), 1e-5);
  }
}

TEST(FusedAttentionGraph, SixteenBitWithinRounding) {
  for (DType t : {DType::bf16, DType::f16}) {
    const Problem p(2, 2, 13, 16, t);
    const Outputs r = run_graphs(p);
    // P, P^T and dS^T are stored 16-bit in the graph, and so is every output
    const double tol = testing_util::sixteen_bit_tolerance(t, 4, 16);
    SCOPED_TRACE(std::string(dtype_name(t)));
    EXPECT_LT(rel_l2(r.o, p.o), tol);
    EXPECT_LT(rel_l2(r.stats, p.stats), 1e-6);  // fp32 from 16-bit inputs
    EXPECT_LT(rel_l2(r.dq, p.dq), tol);
    EXPECT_LT(rel_l2(r.dk, p.dk), tol);
    EXPECT_LT(rel_l2(r.dv, p.dv), tol);
  }
}

// cuDNN adds dQ's products into its fp32 accumulator: a second backward with the same
// workspace must give the same dQ, not twice it.
TEST(FusedAttentionGraph, TheDqAccumulatorStartsFromZeroEachRun) {
  const Problem p(1, 2, 9, 8, DType::f32);
  const Outputs once = run_graphs(p, 1), twice = run_graphs(p, 2);
  EXPECT_LT(rel_l2(twice.dq, p.dq), 1e-5);
  EXPECT_EQ(once.dq, twice.dq);
}

// What the engine keeps on chip stays virtual: no tensor the size of the scores is the caller's,
// and the caller binds exactly Q, K, V, O, the statistics (and dO, dQ, dK, dV, the accumulator).
TEST(FusedAttentionGraph, NoScoreSizedTensorLeavesTheEngine) {
  const Problem p(2, 2, 32, 8, DType::bf16);
  for (const SdpaGraph& g : {sdpa_forward_graph(p.shape), sdpa_backward_graph(p.shape)}) {
    int bound = 0, squares = 0;
    for (const SdpaTensor& t : g.tensors) {
      const bool square = t.dims[2] == p.n && t.dims[3] == p.n;
      squares += square;
      if (square) {
        EXPECT_TRUE(t.is_virtual) << t.name;
      }
      bound += !t.is_virtual && !t.by_value;
    }
    EXPECT_GT(squares, 5);
    EXPECT_EQ(bound, g.d_o < 0 ? 5 : 10);
    for (int role : {g.q, g.k, g.v, g.o, g.stats}) EXPECT_FALSE(g.tensors[role].is_virtual);
  }
  const SdpaGraph b = sdpa_backward_graph(p.shape);
  // What an error quotes when cuDNN takes no graph: every tensor and op, a line each.
  const std::string text = describe_sdpa_graph(b);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), std::ptrdiff_t(b.tensors.size() + b.ops.size()));
  EXPECT_NE(text.find("dQ_accum dims [2,2,32,8] strides [512,256,8,1] fp32 F16x16"), std::string::npos) << text;
  EXPECT_NE(text.find("op pointwise binary_select"), std::string::npos) << text;
  EXPECT_TRUE(b.tensors[b.dq_accum].reordered);
  EXPECT_EQ(b.tensors[b.dq_accum].type, SdpaType::f32);
}

TEST(FusedAttentionGraph, BadShapesAndTypesAreRefused) {
  Problem p(1, 1, 4, 8, DType::f32);
  SdpaShape s = p.shape;
  s.head_dim = 0;
  EXPECT_THROW(sdpa_forward_graph(s), Error);
  s = p.shape;
  s.o_strides[3] = 2;
  EXPECT_THROW(sdpa_backward_graph(s), Error);
  s = p.shape;
  s.t = DType::i32;
  EXPECT_THROW(sdpa_forward_graph(s), Error);
  Exec cuda;
  cuda.backend = Backend::cuda;
  s = p.shape;
  EXPECT_NE(sdpa_unsupported(cuda, s), "");  // fp32, or no cuDNN in this build
  s.t = DType::bf16;
  s.head_dim = 12;
  EXPECT_NE(sdpa_unsupported(cuda, s).find(sdpa_cudnn_built() ? "multiples of 8" : "no cuDNN"), std::string::npos);
  EXPECT_EQ(sdpa_unsupported(Exec{}, s), "");
  // A virtual tensor whose strides give two elements one address is refused, not evaluated.
  SdpaGraph g = sdpa_forward_graph(p.shape);
  g.tensors[g.ops[0].y].strides = {1, 1, 1, 1};
  std::vector<float> memory(4096);
  EXPECT_THROW(evaluate_sdpa_graph(g, [&](int) { return memory.data(); }), Error);
}

TEST(FusedAttentionLayer, EqualsTheMaterializedAttention) {
  const AttentionRun want = run_attention(AttentionKernel::materialized, 128, DType::f32, 2, 13, 3, 8);
  const AttentionRun got = run_attention(AttentionKernel::cudnn, 128, DType::f32, 2, 13, 3, 8);
  expect_close(got, want, 2e-6, "fp32");
  for (DType t : {DType::bf16, DType::f16}) {
    const AttentionRun w = run_attention(AttentionKernel::materialized, 128, t, 2, 11, 2, 8);
    const AttentionRun g = run_attention(AttentionKernel::cudnn, 128, t, 2, 11, 2, 8);
    expect_close(g, w, testing_util::sixteen_bit_tolerance(t, 8, 16), std::string(dtype_name(t)));
  }
}

// The layer runs the fused graph, not a neighbour: one fused op per direction, no score GEMM,
// the statistics kept and not the probabilities.
TEST(FusedAttentionLayer, RunsOneFusedOpAndKeepsOnlyTheStatistics) {
  const int sequences = 2, seq = 9, heads = 3;
  std::vector<TimelineEntry> ops;
  const AttentionRun r = run_attention(AttentionKernel::cudnn, 128, DType::f32, sequences, seq, heads, 8, true, &ops);
  EXPECT_EQ(r.kept_probs, 0u);
  EXPECT_EQ(r.kept_stats, std::size_t(sequences) * heads * seq * sizeof(float));
  int fused = 0, swaps = 0;
  for (const TimelineEntry& e : ops) {
    if (e.range) continue;
    fused += e.name == "sdpa_forward";
    swaps += e.name == "swap_dims";
    EXPECT_NE(e.name, "batched_gemm");
  }
  EXPECT_EQ(fused, 1);
  EXPECT_EQ(swaps, 0) << "Q, K, V are read from the projection's rows, O is written into the context rows";
  EXPECT_EQ(parse_attention_kernel("cudnn"), AttentionKernel::cudnn);
}

TEST(FusedAttentionLayer, GptStepEqualsTheMaterializedModels) {
  testing_util::expect_same_gpt_step(AttentionKernel::cudnn, 2);
}

}  // namespace
}  // namespace moebench
