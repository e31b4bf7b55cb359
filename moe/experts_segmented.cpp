// The experts' segmented route (--expert-gemm segmented): each step of the FFN is one segment GEMM
// (kernels/segment_gemm.h) over every local expert, its rows found from device offsets the
// dispatcher wrote, so no count crosses to the host and a captured step holds for any routing.
// GeLU rides in the first GEMM's epilogue (its input kept as T_M) and its gradient in the
// backward's; the weight gradients come from the weights form, beta 0 on the first backward after
// zero_grad(). Buffers hold the dispatcher's bound of rows; only the routed ones are computed.
#include <algorithm>
#include "kernels/gelu.h"
#include "kernels/segment_gemm.h"
#include "moe/experts.h"

namespace moebench {

namespace {
SegmentGemmArgs rows_form(const ExpertsContext& c, int count, int n, int k, const void* a, const void* b, bool trans_b,
                          void* out, DType t, Epilogue epilogue = Epilogue::none, void* aux = nullptr) {
  SegmentGemmArgs g;
  g.segments = count, g.offset = c.device_offset, g.bound = c.bound;
  g.n = n, g.k = k, g.trans_b = trans_b;
  g.a = a, g.b = b, g.c = out, g.stride_b = (long long)n * k;
  g.epilogue = epilogue, g.aux = aux, g.dtype = t;
  return g;
}

SegmentGemmArgs weights_form(const ExpertsContext& c, int count, int m, int n, const void* a, const void* b, void* out,
                             float beta, DType t) {
  SegmentGemmArgs g;
  g.form = SegmentForm::weights;
  g.segments = count, g.offset = c.device_offset, g.bound = c.bound;
  g.m = m, g.n = n, g.beta = beta;
  g.a = a, g.b = b, g.c = out, g.stride_c = (long long)m * n, g.dtype = t;
  return g;
}
}  // namespace

ExpertsContext Experts::forward(const void* x, const std::int32_t* device_offset, std::size_t bound, void* y,
                                const Stream& s) {
  if (cfg_.expert_gemm != ExpertGemm::segmented)
    throw Error("Experts: device row offsets are for --expert-gemm segmented; this layer's route takes host counts");
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  ExpertsContext c;
  c.x = x;
  c.device_offset = device_offset;
  c.bound = bound;
  const std::size_t rows = std::max<std::size_t>(bound, 1);
  c.h = alloc_.allocate(rows * f * es_, MemTag::activations, s);
  Buffer a = alloc_.allocate(rows * f * es_, cfg_.keep_expert_activation ? MemTag::activations : MemTag::temporary, s);
  const Exec ex = dev_.exec(s);
  // A = GeLU(X W1), H = X W1 kept as the epilogue's aux; then Y = A W2.
  segment_gemm(ex, rows_form(c, count_, f, h, x, w1_.data(), false, a.data(), t, Epilogue::gelu_aux, c.h.data()));
  segment_gemm(ex, rows_form(c, count_, h, f, a.data(), w2_.data(), false, y, t));
  if (cfg_.keep_expert_activation) c.a = std::move(a);
  return c;
}

void Experts::read_rows(ExpertsContext& c, const Stream& s) const {
  if (!c.device_offset || !c.offset.empty()) return;
  std::vector<std::int32_t> offset(count_ + 1);
  dev_.copy_to_host(offset.data(), c.device_offset, offset.size() * 4, s);
  s.synchronize();
  c.offset.assign(offset.begin(), offset.end());
  c.rows.resize(count_);
  for (int l = 0; l < count_; ++l) c.rows[l] = offset[l + 1] - offset[l];
}

void Experts::compute_middle_segmented(ExpertsContext& c, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  c.h = alloc_.allocate(std::max<std::size_t>(c.bound, 1) * f * es_, MemTag::activations, s);
  segment_gemm(dev_.exec(s), rows_form(c, count_, f, h, c.x, w1_.data(), false, c.h.data(), cfg_.dtype));
}

void Experts::backward_segmented(const ExpertsContext& c, const void* dy, void* dx, float beta, const Stream& s,
                                 Buffer* keep_grad_h) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  const std::size_t rows = std::max<std::size_t>(c.bound, 1);
  const Exec ex = dev_.exec(s);
  Buffer recomputed;  // GeLU(H) when forward did not keep it: over the bound (rows past the routed ones are never read)
  if (!c.a) {
    recomputed = alloc_.allocate(rows * f * es_, MemTag::temporary, s);
    gelu_forward(ex, c.h.data(), recomputed.data(), c.bound * f, t);
  }
  const Buffer& act = c.a ? c.a : recomputed;
  Buffer dh = alloc_.allocate(rows * f * es_, MemTag::temporary, s);
  // dH = (dY W2^T) * GeLU'(H); dW2 (+)= A^T dY.
  segment_gemm(ex, rows_form(c, count_, f, h, dy, w2_.data(), true, dh.data(), t, Epilogue::dgelu, c.h.data()));
  segment_gemm(ex, weights_form(c, count_, f, h, act.data(), dy, w2_grad_.data(), beta, t));
  recomputed.release();
  // dW1 (+)= X^T dH; dX = dH W1^T.
  segment_gemm(ex, weights_form(c, count_, h, f, c.x, dh.data(), w1_grad_.data(), beta, t));
  segment_gemm(ex, rows_form(c, count_, h, f, dh.data(), w1_.data(), true, dx, t));
  if (keep_grad_h) *keep_grad_h = std::move(dh);
}

// The six segment GEMMs of forward + backward on the context's rows, every output in scratch
// (inputs zeroed once, when the scratch is taken): the layer's state stays.
void Experts::gemms_only_segmented(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s) {
  const int h = cfg_.hidden, f = cfg_.ffn, wide = std::max(h, f);
  const DType t = cfg_.dtype;
  const std::size_t block = std::max<std::size_t>(c.bound, 1) * wide * es_;
  const void* before = scratch_inputs_.data();
  scratch_alloc.reserve(scratch_inputs_, block, MemTag::temporary, s);
  if (scratch_inputs_.data() != before) dev_.fill_zero(scratch_inputs_.data(), scratch_inputs_.bytes(), s);
  scratch_alloc.reserve(scratch_rows_, 2 * block, MemTag::temporary, s);
  scratch_alloc.reserve(scratch_weights_, std::size_t(count_) * h * f * es_, MemTag::temporary, s);
  void* in = scratch_inputs_.data();
  void* out = scratch_rows_.data();
  void* aux = static_cast<char*>(scratch_rows_.data()) + block;
  void* g = scratch_weights_.data();
  const Exec ex = dev_.exec(s);
  segment_gemm(ex, rows_form(c, count_, f, h, in, w1_.data(), false, out, t, Epilogue::gelu_aux, aux));
  segment_gemm(ex, rows_form(c, count_, h, f, in, w2_.data(), false, out, t));
  segment_gemm(ex, rows_form(c, count_, f, h, in, w2_.data(), true, out, t, Epilogue::dgelu, aux));
  segment_gemm(ex, weights_form(c, count_, f, h, in, in, g, 0.f, t));
  segment_gemm(ex, weights_form(c, count_, h, f, in, in, g, 0.f, t));
  segment_gemm(ex, rows_form(c, count_, h, f, in, w1_.data(), true, out, t));
}

}  // namespace moebench
