// The experts' padded route (--expert-gemm padded): each expert's rows sit in a block of
// padded_block_rows() rows (moe/padded_blocks.h), padding rows zero, so that every step of the FFN
// is one strided-batched GEMM over the experts (kernels/batched_gemm.h) -- on the GPU one
// cublasLtMatmul with GeLU in the forward's epilogue (its input kept as the aux matrix, T_M); GeLU's
// gradient follows the backward's GEMM as a kernel of ours over the expert rows alone, not the
// padding (over a batch, cuBLASLt runs its DGELU epilogue as a separate kernel of its own, the
// slower one, over every row: results/cuda/targets). An expert too busy for its block has its rows
// in the overflow after the blocks (kernels/pad_rows.h) and GEMMs of its own after each batched
// one; its block, all padding, adds nothing to its weight gradients.
// The index-select dispatchers (local, PPMoE) write the rows straight into the layout and read the
// outputs from it; the rows of the others (expert parallel, packed by their exchanges) are padded
// here and unpadded after. What the route costs under skew is the padding and the overflow's GEMMs:
// ExpertsContext::computed_rows() against total_rows().
#include <algorithm>
#include "kernels/batched_gemm.h"
#include "kernels/gelu.h"
#include "kernels/pad_rows.h"
#include "moe/experts.h"
#include "moe/padded_blocks.h"

namespace moebench {

namespace {

// An expert in the overflow: its rows from `start` of the padded layout.
struct Overflow {
  int expert;
  std::size_t start;
  int rows;
};

std::vector<Overflow> overflow_of(const ExpertsContext& c) {
  std::vector<Overflow> out;
  const std::vector<std::size_t> start = padded_starts(c.offset, c.padded);
  for (int e = 0; e + 1 < int(c.offset.size()); ++e)
    if (c.rows[e] > c.padded) out.push_back({e, start[e], c.rows[e]});
  return out;
}

char* at(const void* base, std::size_t row, long long width, std::size_t es) {
  return static_cast<char*>(const_cast<void*>(base)) + row * std::size_t(width) * es;
}

BatchedGemmArgs one(const GemmArgs& g) { return strided_batch(g, 1, 0, 0, 0); }

}  // namespace


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
  if (!c.given_padded) c.padded = padded_block_rows(c.rows, cfg_.padded_cost);
  const int P = c.padded;
  const long long Ph = (long long)P * h, Pf = (long long)P * f, hf = (long long)h * f;
  const std::size_t rows = std::max<std::size_t>(c.computed_rows(), 1);
  const std::vector<Overflow> over = overflow_of(c);
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  c.h = alloc_.allocate(rows * f * es_, MemTag::activations, s);
  Buffer a = alloc_.allocate(rows * f * es_, cfg_.keep_expert_activation ? MemTag::activations : MemTag::temporary, s);
  const Exec ex = dev_.exec(s);
  // A = GeLU(X W1), H = X W1 kept as the epilogue's aux matrix.
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, f, h, x, w1_.data(), a.data(), t), count_, Ph, hf, Pf,
                                Epilogue::gelu_aux, c.h.data()));
  for (const Overflow& o : over)
    batched_gemm(ex, with_epilogue(dense_gemm(false, false, o.rows, f, h, at(x, o.start, h, es_), w1_at(o.expert),
                                              at(a.data(), o.start, f, es_), t),
                                   Epilogue::gelu_aux, at(c.h.data(), o.start, f, es_)));
  // Y = A W2: into y when it has the layout, else into xp's memory (the stream has finished reading
  // X by then) and out to y's packed rows.
  void* yp = c.given_padded ? y : xp.data();
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, h, f, a.data(), w2_.data(), yp, t), count_, Pf, hf, Ph));
  for (const Overflow& o : over)
    batched_gemm(ex, one(dense_gemm(false, false, o.rows, h, f, at(a.data(), o.start, f, es_), w2_at(o.expert),
                                    at(yp, o.start, h, es_), t)));
  if (!c.given_padded) unpad_rows(ex, RowPadding{c.offset, P, h, t}, yp, y);
  if (cfg_.keep_expert_activation) c.a = std::move(a);
}

void Experts::compute_middle_padded(ExpertsContext& c, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn, P = c.padded;
  c.h = alloc_.allocate(std::max<std::size_t>(c.computed_rows(), 1) * f * es_, MemTag::activations, s);
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  const Exec ex = dev_.exec(s);
  batched_gemm(ex, strided_batch(dense_gemm(false, false, P, f, h, x, w1_.data(), c.h.data(), cfg_.dtype), count_,
                                (long long)P * h, (long long)h * f, (long long)P * f));
  for (const Overflow& o : overflow_of(c))
    batched_gemm(ex, one(dense_gemm(false, false, o.rows, f, h, at(x, o.start, h, es_), w1_at(o.expert),
                                    at(c.h.data(), o.start, f, es_), cfg_.dtype)));
}

void Experts::backward_padded(const ExpertsContext& c, const void* dy, void* dx, float beta, const Stream& s,
                              Buffer* keep_grad_h) {
  const int h = cfg_.hidden, f = cfg_.ffn, P = c.padded;
  const DType t = cfg_.dtype;
  const long long Ph = (long long)P * h, Pf = (long long)P * f, hf = (long long)h * f;
  const std::size_t rows = std::max<std::size_t>(c.computed_rows(), 1);
  const std::vector<Overflow> over = overflow_of(c);
  const Exec ex = dev_.exec(s);
  const auto w_grad = [&](Buffer& g, int e) { return at(g.data(), std::size_t(e), hf, es_); };
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
  // dH = (dY W2^T) * GeLU'(H), GeLU's gradient in place; dW2 (+)= A^T dY. An overflowing expert's
  // block adds zero to its weight gradients (or writes zero, beta 0), then its own GEMM adds its rows'.
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, f, h, dyp, w2_.data(), dh.data(), t), count_, Ph, hf, Pf));
  for (const Overflow& o : over)
    batched_gemm(ex, one(dense_gemm(false, true, o.rows, f, h, at(dyp, o.start, h, es_), w2_at(o.expert),
                                    at(dh.data(), o.start, f, es_), t)));
  gelu_backward_in_blocks(ex, RowPadding{c.offset, P, f, t}, c.h.data(), dh.data());  // padding rows stay zero
  batched_gemm(ex, strided_batch(dense_gemm(true, false, f, h, P, act.data(), dyp, w2_grad_.data(), t, 1.f, beta),
                                count_, Pf, Ph, hf));
  for (const Overflow& o : over)
    batched_gemm(ex, one(dense_gemm(true, false, f, h, o.rows, at(act.data(), o.start, f, es_), at(dyp, o.start, h, es_),
                                    w_grad(w2_grad_, o.expert), t, 1.f, beta)));
  recomputed.release();
  // dW1 (+)= X^T dH; dX = dH W1^T: into dx when it has the layout, else into dY's padded copy
  // (read by then) and out to dx's packed rows.
  Buffer xp;
  const void* x = padded_x(c, &xp, s);
  batched_gemm(ex, strided_batch(dense_gemm(true, false, h, f, P, x, dh.data(), w1_grad_.data(), t, 1.f, beta),
                                count_, Ph, Pf, hf));
  for (const Overflow& o : over)
    batched_gemm(ex, one(dense_gemm(true, false, h, f, o.rows, at(x, o.start, h, es_), at(dh.data(), o.start, f, es_),
                                    w_grad(w1_grad_, o.expert), t, 1.f, beta)));
  void* dxp = c.given_padded ? dx : dy_copy.data();
  batched_gemm(ex, strided_batch(dense_gemm(false, true, P, h, f, dh.data(), w1_.data(), dxp, t), count_, Pf, hf, Ph));
  for (const Overflow& o : over)
    batched_gemm(ex, one(dense_gemm(false, true, o.rows, h, f, at(dh.data(), o.start, f, es_), w1_at(o.expert),
                                    at(dxp, o.start, h, es_), t)));
  if (!c.given_padded) unpad_rows(ex, RowPadding{c.offset, P, h, t}, dxp, dx);
  if (keep_grad_h) *keep_grad_h = std::move(dh);
}

// The batched GEMMs of forward + backward on the context's padded shapes, and the overflow's
// (GeLU's gradient, a kernel apart, is not one of them), every operand and output in scratch
// (inputs zeroed once, when the scratch is taken): the layer's state stays.
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
  for (const Overflow& o : overflow_of(c)) {  // its six GEMMs, on the stand-ins' first rows
    const int r = o.rows;
    batched_gemm(ex, with_epilogue(dense_gemm(false, false, r, f, h, in, w1_at(o.expert), out, t), Epilogue::gelu_aux, aux));
    batched_gemm(ex, one(dense_gemm(false, false, r, h, f, in, w2_at(o.expert), out, t)));
    batched_gemm(ex, one(dense_gemm(false, true, r, f, h, in, w2_at(o.expert), out, t)));
    batched_gemm(ex, one(dense_gemm(true, false, f, h, r, in, in, g, t)));
    batched_gemm(ex, one(dense_gemm(true, false, h, f, r, in, in, g, t)));
    batched_gemm(ex, one(dense_gemm(false, true, r, h, f, in, w1_at(o.expert), out, t)));
  }
}

}  // namespace moebench
