// Causal scaled dot-product attention as the operation graphs cuDNN's fused (flash) attention
// engines take: rank-4 tensors, each with dims and strides, and the matmul, pointwise,
// reduction and reshape operations between them, in the order they run. The [seq, seq] scores,
// probabilities and their gradients are virtual tensors: the fused engine keeps them on chip,
// and nothing that size is stored.
//
// kernels/sdpa_cudnn.cpp turns a graph into cuDNN backend descriptors; evaluate_sdpa_graph runs
// the same graph op by op on the CPU (every virtual tensor materialised), which is how the CPU
// checks that the graph computes attention, before a GPU says whether cuDNN accepts it.
//
// Forward:  S = Q K^T;  S *= scale;  S = row >= col ? S : lowest;  M = rowmax S;  E = exp(S - M);
//           Z = rowsum E;  stats = M + log Z;  P = E / Z (in the I/O type);  O = P V
// Backward: D = rowsum(dO o O);  S as above;  P = exp(S - stats);  dV = P^T dO;
//           dS = scale P (dO V^T - D);  dK = dS^T Q;  dQ = dS K, accumulated in fp32 (a zeroed
//           buffer cuDNN's non-deterministic backward adds into), then converted to dQ's type.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>
#include "kernels/dtype.h"

namespace moebench {

enum class SdpaType { f32, f16, bf16, i32, boolean };
SdpaType sdpa_type(DType t);

struct SdpaTensor {
  std::string name;
  std::int64_t uid = 0;
  std::array<std::int64_t, 4> dims{}, strides{};
  SdpaType type = SdpaType::f32;
  bool is_virtual = true;
  bool by_value = false;  // a scalar passed in the variant pack from the host
  float value = 0.f;      // by_value: the scalar
  bool reordered = false; // cuDNN's F16x16 reordering (dQ's fp32 accumulator)
};

enum class SdpaOpKind { matmul, pointwise, reduction, reshape };
enum class SdpaPointwise { mul, add, sub, div, exp, log, gen_index, cmp_ge, binary_select, identity };
enum class SdpaReduce { max, add };

struct SdpaOp {
  SdpaOpKind kind;
  SdpaPointwise mode = SdpaPointwise::identity;
  SdpaReduce reduce = SdpaReduce::add;
  int axis = 0;  // gen_index: the dimension whose index it writes
  SdpaType compute = SdpaType::f32;
  // Tensor indices. matmul: y = x b; pointwise: y = f(x, b, t) (b, t: -1 when unused); binary
  // select: y = t ? x : b; reduction: y = reduce x over the dims where y has 1; reshape: y views
  // x's memory with its own dims and strides.
  int x = -1, b = -1, t = -1, y = -1;
};

// The attention of `sequences` x `heads` blocks of [seq, head_dim]. Tensors are laid out by
// element strides over (sequence, head, row, column), the column's being 1; the statistics are
// fp32 [sequences, heads, seq] (the layout cuDNN's engines default to).
struct SdpaShape {
  int sequences = 0, heads = 0, seq = 0, head_dim = 0;
  std::array<std::int64_t, 4> strides{};    // of Q, K, V, dQ, dK, dV
  std::array<std::int64_t, 4> o_strides{};  // of O and dO
  float scale = 1.f;
  DType t = DType::bf16;
};

struct SdpaGraph {
  std::vector<SdpaTensor> tensors;
  std::vector<SdpaOp> ops;
  // The caller's tensors, by role; -1 where the direction has none.
  int q = -1, k = -1, v = -1, o = -1, stats = -1, d_o = -1, dq = -1, dk = -1, dv = -1;
  int dq_accum = -1;  // backward: fp32 [sequences, heads, seq, head_dim], zeroed before each run
  std::size_t dq_accum_bytes() const;
};

SdpaGraph sdpa_forward_graph(const SdpaShape& s);
SdpaGraph sdpa_backward_graph(const SdpaShape& s);

// The graph as text, a line per tensor (uid, name, dims, strides, type, virtual / by value) and
// per op: what an error quotes when cuDNN finds no engine for it.
std::string describe_sdpa_graph(const SdpaGraph& g);

// Runs `g` on the CPU: `bound(index)` gives each non-virtual, non-scalar tensor's memory, fp32
// laid out by its strides (16-bit tensors are passed widened; what is written to them is rounded
// to their type, as are the virtual tensors declared 16-bit).
void evaluate_sdpa_graph(const SdpaGraph& g, const std::function<float*(int)>& bound);

}  // namespace moebench
