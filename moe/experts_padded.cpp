// The experts' padded route (--expert-gemm padded): each expert's rows sit in a block of as
// many rows as the busiest expert has, padding rows zero, so that every step of the FFN is one
// strided-batched GEMM over the experts (kernels/batched_gemm.h) -- on the GPU one cublasLtMatmul
// with GeLU in the forward's epilogue (its input kept as the aux matrix, T_M); GeLU's gradient
// follows the backward's GEMM as a kernel of ours (over a batch, cuBLASLt runs its DGELU epilogue
// as a separate kernel of its own, the slower one: results/cuda/targets). Zero padding rows add
// nothing to the weight gradients. The index-select dispatchers (local, PPMoE) write the rows
// straight into the blocks and read the outputs from them; the rows of the others (expert
// parallel, packed by their exchanges) are padded here and unpadded after. What the route costs
// under skew is the padding: ExpertsContext::computed_rows() against total_rows().
#include <algorithm>
#include "kernels/batched_gemm.h"
#include "kernels/gelu.h"
#include "kernels/pad_rows.h"
#include "moe/experts.h"

namespace moebench {


Buffer Experts::pad(const ExpertsContext& c, const void* packed, int width, const Stream& s) {
  Buffer out = alloc_.allocate(std::max<std::size_t>(c.computed_rows(), 1) * width * es_, MemTag::temporary, s);
  pad_rows(dev_.exec(s), RowPadding{c.offset, c.padded, width, cfg_.dtype}, packed, out.data());
  return out;
}

const void* Experts::padded_x(const ExpertsContext& c, Buffer* copy, const Stream& s) {
  if (c.given_padded) return c.x;
  *copy = pad(c, c.x, cfg_.hidden, s);
  return copy->data();
}

void Experts::forward_padded(ExpertsContext& c, void* y, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  if (!c.given_padded) c.padded = c.rows.empty() ? 0 : *std::max_element(c.rows.begin(), c.rows.end());
  const int P = c.padded;
  const long long Ph = (long long)P * h, Pf = (long long)P * f, hf = (long long)h * f;
  const std::size_t rows = std::max<std::size_t>(c.computed_rows(), 1);
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  c.h = alloc_.allocate(rows * f * es_, MemTag::activations, s);
  Buffer a = alloc_.allocate(rows * f * es_, cfg_.keep_expert_activation ? MemTag::activations : MemTag::temporary, s);
  const Exec ex = dev_.exec(s);
  // A = GeLU(X W1), H = X W1 kept as the epilogue's aux matrix.
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, f, h, x, w1_.data(), a.data(), t), count_, Ph, hf, Pf,
                                Epilogue::gelu_aux, c.h.data()));
  // Y = A W2: into y when it has the blocks, else into xp's memory (the stream has finished reading
  // X by then) and out to y's packed rows.
  void* yp = c.given_padded ? y : xp.data();
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, h, f, a.data(), w2_.data(), yp, t), count_, Pf, hf, Ph));
  if (!c.given_padded) unpad_rows(ex, RowPadding{c.offset, P, h, t}, yp, y);
  if (cfg_.keep_expert_activation) c.a = std::move(a);
}

void Experts::compute_middle_padded(ExpertsContext& c, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn, P = c.padded;
  c.h = alloc_.allocate(std::max<std::size_t>(c.computed_rows(), 1) * f * es_, MemTag::activations, s);
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  batched_gemm(dev_.exec(s), strided_batch(dense_gemm(false, false, P, f, h, x, w1_.data(), c.h.data(), cfg_.dtype),
                                          count_, (long long)P * h, (long long)h * f, (long long)P * f));
}

void Experts::backward_padded(const ExpertsContext& c, const void* dy, void* dx, float beta, const Stream& s,
                              Buffer* keep_grad_h) {
  const int h = cfg_.hidden, f = cfg_.ffn, P = c.padded;
  const DType t = cfg_.dtype;
  const long long Ph = (long long)P * h, Pf = (long long)P * f, hf = (long long)h * f;
  const std::size_t rows = std::max<std::size_t>(c.computed_rows(), 1);
  const Exec ex = dev_.exec(s);
  Buffer recomputed;  // GeLU(H) when forward did not keep it
  if (!c.a) {
    recomputed = alloc_.allocate(rows * f * es_, MemTag::temporary, s);
    gelu_forward(ex, c.h.data(), recomputed.data(), c.computed_rows() * f, t);
  }
  const Buffer& act = c.a ? c.a : recomputed;
  Buffer dy_copy;
  if (!c.given_padded) dy_copy = pad(c, dy, h, s);
  void* dyp = c.given_padded ? const_cast<void*>(dy) : dy_copy.data();
  Buffer dh = alloc_.allocate(rows * f * es_, MemTag::temporary, s);
  // dH = (dY W2^T) * GeLU'(H), GeLU's gradient in place; dW2 (+)= A^T dY.
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, f, h, dyp, w2_.data(), dh.data(), t), count_, Ph, hf, Pf));
  gelu_backward(ex, c.h.data(), dh.data(), dh.data(), c.computed_rows() * f, t);
  batched_gemm(ex, strided_batch(dense_gemm(true, false, f, h, P, act.data(), dyp, w2_grad_.data(), t, 1.f, beta),
                                count_, Pf, Ph, hf));
  recomputed.release();
  // dW1 (+)= X^T dH; dX = dH W1^T: into dx when it has the blocks, else into dY's padded copy
  // (read by then) and out to dx's packed rows.
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  batched_gemm(ex, strided_batch(dense_gemm(true, false, h, f, P, x, dh.data(), w1_grad_.data(), t, 1.f, beta),
                                count_, Ph, Pf, hf));
  void* dxp = c.given_padded ? dx : dy_copy.data();
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, h, f, dh.data(), w1_.data(), dxp, t), count_, Pf, hf, Ph));
  if (!c.given_padded) unpad_rows(ex, RowPadding{c.offset, P, h, t}, dxp, dx);
  if (keep_grad_h) *keep_grad_h = std::move(dh);
}

// The six batched GEMMs of forward + backward on the context's padded shapes (GeLU's gradient, a
// kernel apart, is not one of them), every operand and output in scratch (inputs zeroed once,
// when the scratch is taken): the layer's state stays.
void Experts::gemms_only_padded(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn, P = c.padded, wide = std::max(h, f);
  const DType t = cfg_.dtype;
  const long long Ph = (long long)P * h, Pf = (long long)P * f, hf = (long long)h * f;
  const std::size_t rows = std::max<std::size_t>(c.computed_rows(), 1), block = rows * wide * es_;
  const void* before = scratch_inputs_.data();
  scratch_alloc.reserve(scratch_inputs_, block, MemTag::temporary, s);
  if (scratch_inputs_.data() != before) dev_.fill_zero(scratch_inputs_.data(), scratch_inputs_.bytes(), s);
  scratch_alloc.reserve(scratch_rows_, 2 * block, MemTag::temporary, s);
  scratch_alloc.reserve(scratch_weights_, std::size_t(count_) * hf * es_, MemTag::temporary, s);
  void* in = scratch_inputs_.data();
  void* out = scratch_rows_.data();
  void* aux = static_cast<char*>(scratch_rows_.data()) + block;
  void* g = scratch_weights_.data();
  const Exec ex = dev_.exec(s);
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, f, h, in, w1_.data(), out, t), count_, Ph, hf, Pf,
                                Epilogue::gelu_aux, aux));
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, h, f, in, w2_.data(), out, t), count_, Pf, hf, Ph));
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, f, h, in, w2_.data(), out, t), count_, Ph, hf, Pf));
  batched_gemm(ex, strided_batch(dense_gemm(true, false, f, h, P, in, in, g, t), count_, Pf, Ph, hf));
  batched_gemm(ex, strided_batch(dense_gemm(true, false, h, f, P, in, in, g, t), count_, Ph, Pf, hf));
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, h, f, in, w1_.data(), out, t), count_, Pf, hf, Ph));
}

}  // namespace moebench
