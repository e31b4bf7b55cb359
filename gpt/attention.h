// Causal multi-head self-attention of a decoder block, forward and backward:
//   [Q K V] = x Wqkv;  per (sequence, head): P = softmax_causal(Q K^T / sqrt(d)),  C = P V;
//   y = C Wo
// x, y: [sequences x seq, hidden] rows, sequence after sequence. Wqkv [hidden, 3 hidden] and Wo
// [hidden, hidden] hold `heads` heads of d = hidden / heads columns each (a tensor-parallel rank
// holds a slice of the heads: `first_head` names its first). Weights, gradients and activations
// in `dtype` (fp32, or fp16/bf16 with fp32 arithmetic). The QKV rows are laid out head-major
// for the core, so that each of its GEMMs is one strided batch over every (head, sequence).
// Three ways to the same result (AttentionKernel): `materialized` keeps P ([seq, seq] per head
// and sequence) for the backward; `blocked` (attention_blocked.cpp) computes the scores a panel
// of query rows at a time, skips the panels' keys no row sees, keeps only each row's softmax
// statistic, and recomputes the panels in the backward; `cudnn` (attention_cudnn.cpp) runs
// cuDNN's fused attention (kernels/sdpa.h), which keeps the same statistic and no scores at all.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include "kernels/dtype.h"
#include "gpt/head_gemms.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/range.h"

namespace moebench {

enum class AttentionKernel {
  by_backend,    // blocked on CUDA (no S x S tensor kept); materialized on the CPU (the reference)
  materialized,  // P = softmax(Q K^T) stored whole, as [heads, seq, seq] per sequence
  blocked,       // panels of panel_rows query rows; per-row statistics kept instead of P
  cudnn,         // cuDNN's fused attention (fp16/bf16, head dim a multiple of 8 up to 128); on the
                 // CPU its operation graph evaluated op by op, as a check of that graph
};
const char* attention_kernel_name(AttentionKernel k);
// The kernel `name` selects (materialized, blocked, cudnn); nullopt for another name.
std::optional<AttentionKernel> parse_attention_kernel(const std::string& name);

struct AttentionConfig {
  int hidden = 0;      // the model's width (the input's columns)
  int heads = 0;       // heads on this rank
  int head_dim = 0;    // d
  int first_head = 0;  // global index of the first (weights depend on (seed, layer, head) alone)
  int layer = 0;
  DType dtype = DType::f32;
  AttentionKernel kernel = AttentionKernel::by_backend;
  // blocked: query rows per panel. Each panel costs a few launches per sequence and layer, so
  // panels are tall (4 at seq 2048); shorter ones skip more of the masked keys.
  int panel_rows = 512;
};

// A weight-gradient GEMM a backward left for later (the zero-bubble schedules' W): it holds
// what it reads and runs on the stream it is given.
using WeightTask = std::function<void(const Stream&)>;

// What one micro-batch's forward keeps for its backward.
struct AttentionContext {
  int sequences = 0, seq = 0;
  const void* x = nullptr;  // the caller's input, alive until backward
  Buffer qkv;    // Q, K, V head-major: [3, heads, sequences x seq, d] (kernels/swap_dims.h); for
                 // cudnn, the projection's rows [sequences x seq, 3 heads d]
  Buffer ctx;    // the context rows [sequences x seq, heads d] (the output projection's input)
  Buffer probs;  // materialized: P, [heads, sequences, seq, seq]
  Buffer stats;  // each row's log-sum-exp of its scaled scores, fp32: blocked [heads, sequences, seq],
                 // cudnn [sequences, heads, seq]
};

class CausalSelfAttention {
 public:
  CausalSelfAttention(const AttentionConfig& cfg, Device& dev, TrackingAllocator& alloc);
  void init(std::uint64_t seed, const Stream& s);
  void zero_grad(const Stream& s);

  // y = attention(x) (y overwritten; with `accumulate`, y += attention(x)).
  AttentionContext forward(const void* x, void* y, int sequences, int seq, const Stream& s, bool accumulate = false);
  // dx = d/dx (dx overwritten; with `accumulate`, dx += it); weight gradients accumulate --
  // now, or, with `deferred`, in tasks appended there (c.x must then live until they ran).
  void backward(AttentionContext& c, const void* dy, void* dx, const Stream& s, bool accumulate = false,
                std::vector<WeightTask>* deferred = nullptr);

  int qkv_width() const { return 3 * cfg_.heads * cfg_.head_dim; }
  int inner() const { return cfg_.heads * cfg_.head_dim; }
  const Buffer& wqkv() const { return wqkv_; }
  const Buffer& wo() const { return wo_; }
  Buffer& wqkv() { return wqkv_; }
  Buffer& wo() { return wo_; }
  const Buffer& wqkv_grad() const { return dwqkv_; }
  const Buffer& wo_grad() const { return dwo_; }
  // The kernel this layer runs (by_backend resolved).
  AttentionKernel kernel() const { return kernel_; }
  // Times its parts into `b` (null: none): attention.qkv, attention.core and attention.out, each
  // .fwd and .bwd (the projections' input-gradient GEMMs, the core's S x S work and its layout
  // swaps), and attention.wgrad.
  void set_breakdown(Breakdown* b) { breakdown_ = b; }

 private:
  // What the core functions share: the (head, sequence) blocks' shape and Q, K, V among them.
  struct Core {
    int d, seq, tokens, batch;  // batch: heads x sequences blocks of [seq, d], `block` elements apart
    long long block;
    DType t;
    std::size_t es;
    float scale;  // 1 / sqrt(d)
    head_gemms::HeadBlocks q, k, v;
    // Another head-major buffer of this shape (its first of Q, K, V; next() for the others).
    head_gemms::HeadBlocks of(const void* head_major) const { return {head_major, q.span, d, es}; }
  };
  Core core(const AttentionContext& c) const;
  // Between the QKV and output projections, head-major (head_gemms::HeadBlocks): ctx from c.qkv,
  // and dqkv from dctx (the blocked backward also reads dctx's rows, for rowsum(dC o C)).
  void materialized_forward(AttentionContext& c, void* ctx_heads, const Stream& s);
  void materialized_backward(AttentionContext& c, const void* dctx_heads, void* dqkv_heads, const Stream& s);
  void blocked_forward(AttentionContext& c, void* ctx_heads, const Stream& s);
  void blocked_backward(AttentionContext& c, const void* dctx_rows, const void* dctx_heads, void* dqkv_heads,
                        const Stream& s);
  void cudnn_forward(AttentionContext& c, void* ctx_heads, const Stream& s);
  // cudnn: Q, K, V (and their gradients) stay in the QKV rows, O and dO in the context rows.
  void cudnn_backward(AttentionContext& c, const void* dctx_rows, void* dqkv_rows, const Stream& s);

  AttentionConfig cfg_;
  AttentionKernel kernel_;
  Device& dev_;
  TrackingAllocator& alloc_;
  Buffer wqkv_, wo_, dwqkv_, dwo_;  // [hidden, 3 inner], [inner, hidden]
  Breakdown* breakdown_ = nullptr;
};

}  // namespace moebench
