#include "moe/experts.h"
#include <algorithm>
#include <string>
#include "kernels/convert.h"
#include "kernels/gelu.h"
#include "moe/init.h"

namespace moebench {

Experts::Experts(const MoEConfig& cfg, Device& dev, TrackingAllocator& alloc, int first_expert, int count)
    : cfg_(cfg), dev_(dev), alloc_(alloc), first_(first_expert), count_(count), es_(dtype_size(cfg.dtype)) {
  const std::size_t n = std::size_t(count) * cfg.hidden * cfg.ffn * es_;
  w1_ = alloc_.allocate(n, MemTag::model_states);
  w2_ = alloc_.allocate(n, MemTag::model_states);
  w1_grad_ = alloc_.allocate(n, MemTag::model_states);
  w2_grad_ = alloc_.allocate(n, MemTag::model_states);
}

void Experts::init(std::uint64_t seed, const Stream& s) {
  const std::size_t per = std::size_t(cfg_.hidden) * cfg_.ffn;
  Buffer staging;
  if (cfg_.dtype != DType::f32) staging = alloc_.allocate(per * 4, MemTag::temporary, s);
  for (int i = 0; i < count_; ++i) {
    const std::uint64_t e = std::uint64_t(first_ + i);
    for (int which = 0; which < 2; ++which) {
      const auto w = normal_vector(per, seed, 1000 + 2 * e + which, 0.02f);
      char* dst = static_cast<char*>(which == 0 ? w1_.data() : w2_.data()) + i * per * es_;
      if (cfg_.dtype == DType::f32) {
        dev_.copy_to_device(dst, w.data(), per * 4, s);
      } else {
        dev_.copy_to_device(staging.data(), w.data(), per * 4, s);
        convert(dev_.exec(s), staging.data(), DType::f32, dst, cfg_.dtype, per);
      }
    }
  }
  dev_.fill_zero(w1_grad_.data(), w1_grad_.bytes(), s);  // readable zeros before any backward
  dev_.fill_zero(w2_grad_.data(), w2_grad_.bytes(), s);
  zero_grad(s);
  s.synchronize();
}

void Experts::zero_grad(const Stream&) { overwrite_grads_ = true; }

const char* Experts::w1_at(int e) const { return static_cast<const char*>(w1_.data()) + std::size_t(e) * cfg_.hidden * cfg_.ffn * es_; }
const char* Experts::w2_at(int e) const { return static_cast<const char*>(w2_.data()) + std::size_t(e) * cfg_.hidden * cfg_.ffn * es_; }

// One grouped call; its device pointer arrays are the call's own (pooled, in stream order), so
// calls on two streams never share them.
void Experts::run(std::vector<GemmArgs>& problems, const Stream& s) {
  if (cfg_.expert_gemm == ExpertGemm::streams) return run_on_side_streams(problems, s);
  Buffer pointers = alloc_.allocate(grouped_gemm_workspace_bytes(problems.size()), MemTag::buffers, s);
  grouped_gemm(dev_.exec(s), problems, cfg_.expert_gemm, pointers.data(), pointers.bytes());
}

double Experts::forward_flops(const ExpertsContext& c) const {
  double f = 0;
  for (int r : c.rows) f += 2 * gemm_flops(r, cfg_.ffn, cfg_.hidden);
  return f;
}

static char* row_at(const void* base, std::size_t row, int width, std::size_t es) {
  return static_cast<char*>(const_cast<void*>(base)) + row * width * es;
}

ExpertsContext Experts::forward(const void* x, const std::vector<int>& rows, void* y, const Stream& s, int padded) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  if (int(rows.size()) != count_)
    throw Error("Experts: row counts for " + std::to_string(rows.size()) + " experts, this rank holds " +
                std::to_string(count_));
  ExpertsContext c;
  c.x = x;
  c.rows = rows;
  c.offset = row_offsets(rows);
  if (cfg_.expert_gemm == ExpertGemm::segmented)
    throw Error("Experts: --expert-gemm segmented reads its row counts on the device; this dispatcher gave host counts");
  if (padded && cfg_.expert_gemm != ExpertGemm::padded)
    throw Error(std::string("Experts: rows in padded blocks are for --expert-gemm padded, not ") +
                expert_gemm_name(cfg_.expert_gemm));
  if (cfg_.expert_gemm == ExpertGemm::padded) {
    c.padded = padded;
    c.given_padded = padded > 0;
    forward_padded(c, y, s);
    return c;
  }
  const std::size_t R = c.total_rows();
  compute_middle(c, s);
  // Not kept: a temporary, released once the second GEMM has it (stream order).
  Buffer a = alloc_.allocate(std::max<std::size_t>(R, 1) * f * es_,
                             cfg_.keep_expert_activation ? MemTag::activations : MemTag::temporary, s);
  gelu_forward(dev_.exec(s), c.h.data(), a.data(), R * f, t);
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e)
    p.push_back(dense_gemm(false, false, rows[e], h, f, row_at(a.data(), c.offset[e], f, es_), w2_at(e),
                           row_at(y, c.offset[e], h, es_), t));
  run(p, s);
  if (cfg_.keep_expert_activation) c.a = std::move(a);
  return c;
}

void Experts::compute_middle(ExpertsContext& c, const Stream& s) {
  if (c.device_offset) return compute_middle_segmented(c, s);
  if (cfg_.expert_gemm == ExpertGemm::padded) return compute_middle_padded(c, s);
  const int h = cfg_.hidden, f = cfg_.ffn;
  c.h = alloc_.allocate(std::max<std::size_t>(c.total_rows(), 1) * f * es_, MemTag::activations, s);
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e)
    p.push_back(dense_gemm(false, false, c.rows[e], f, h, row_at(c.x, c.offset[e], h, es_), w1_at(e),
                           row_at(c.h.data(), c.offset[e], f, es_), cfg_.dtype));
  run(p, s);
}

void Experts::backward(const ExpertsContext& c, const void* dy, void* dx, const Stream& s, Buffer* keep_grad_h) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  const float beta = overwrite_grads_ ? 0.f : 1.f;  // the stream runs this backward's GEMMs in order
  overwrite_grads_ = false;
  if (c.device_offset) return backward_segmented(c, dy, dx, beta, s, keep_grad_h);
  if (cfg_.expert_gemm == ExpertGemm::padded) return backward_padded(c, dy, dx, beta, s, keep_grad_h);
  const std::size_t R = c.total_rows(), per = std::size_t(h) * f * es_;
  Buffer recomputed;  // GeLU(h) when forward did not keep it
  if (!c.a) {
    recomputed = alloc_.allocate(std::max<std::size_t>(R, 1) * f * es_, MemTag::temporary, s);
    gelu_forward(dev_.exec(s), c.h.data(), recomputed.data(), R * f, t);
  }
  const Buffer& act = c.a ? c.a : recomputed;
  Buffer da = alloc_.allocate(std::max<std::size_t>(R, 1) * f * es_, MemTag::temporary, s);
  char* g1 = static_cast<char*>(w1_grad_.data());
  char* g2 = static_cast<char*>(w2_grad_.data());
  // dA = dY W2^T and dW2 += A^T dY are independent: one grouped call.
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e) {
    p.push_back(dense_gemm(false, true, c.rows[e], f, h, row_at(dy, c.offset[e], h, es_), w2_at(e),
                           row_at(da.data(), c.offset[e], f, es_), t));
    p.push_back(dense_gemm(true, false, f, h, c.rows[e], row_at(act.data(), c.offset[e], f, es_),
                           row_at(dy, c.offset[e], h, es_), g2 + e * per, t, 1.f, beta));
  }
  run(p, s);
  recomputed.release();
  gelu_backward(dev_.exec(s), c.h.data(), da.data(), da.data(), R * f, t);
  // dW1 += X^T dH and dX = dH W1^T.
  p.clear();
  for (int e = 0; e < count_; ++e) {
    p.push_back(dense_gemm(true, false, h, f, c.rows[e], row_at(c.x, c.offset[e], h, es_),
                           row_at(da.data(), c.offset[e], f, es_), g1 + e * per, t, 1.f, beta));
    p.push_back(dense_gemm(false, true, c.rows[e], h, f, row_at(da.data(), c.offset[e], f, es_), w1_at(e),
                           row_at(dx, c.offset[e], h, es_), t));
  }
  run(p, s);
  if (keep_grad_h) *keep_grad_h = std::move(da);
}

void Experts::gemms_only(const ExpertsContext& c, TrackingAllocator& scratch_alloc, const Stream& s) {
  if (c.device_offset) return gemms_only_segmented(c, scratch_alloc, s);
  if (c.padded) return gemms_only_padded(c, scratch_alloc, s);
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  const std::size_t per = std::size_t(h) * f * es_, R = std::max<std::size_t>(c.total_rows(), 1);
  scratch_alloc.reserve(scratch_rows_, R * std::max(h, f) * es_, MemTag::temporary, s);
  scratch_alloc.reserve(scratch_weights_, std::size_t(count_) * per, MemTag::temporary, s);
  void* out = scratch_rows_.data();
  char* g = static_cast<char*>(scratch_weights_.data());  // stands in for both weight gradients
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e)  // H = X W1
    p.push_back(dense_gemm(false, false, c.rows[e], f, h, row_at(c.x, c.offset[e], h, es_), w1_at(e),
                           row_at(out, c.offset[e], f, es_), t));
  run(p, s);
  p.clear();
  const void* act = c.a ? c.a.data() : c.h.data();  // stands in for A when it was not kept
  for (int e = 0; e < count_; ++e)  // Y = A W2
    p.push_back(dense_gemm(false, false, c.rows[e], h, f, row_at(act, c.offset[e], f, es_), w2_at(e),
                           row_at(out, c.offset[e], h, es_), t));
  run(p, s);
  p.clear();
  // The weight gradients as a layer's one backward after zero_grad() computes them: overwritten
  // (beta 0), the second call's as the first's.
  for (int e = 0; e < count_; ++e) {  // dA = dY W2^T, dW2 = A^T dY (x stands in for dY)
    p.push_back(dense_gemm(false, true, c.rows[e], f, h, row_at(c.x, c.offset[e], h, es_), w2_at(e),
                           row_at(out, c.offset[e], f, es_), t));
    p.push_back(dense_gemm(true, false, f, h, c.rows[e], row_at(act, c.offset[e], f, es_),
                           row_at(c.x, c.offset[e], h, es_), g + e * per, t, 1.f, 0.f));
  }
  run(p, s);
  p.clear();
  for (int e = 0; e < count_; ++e) {  // dW1 = X^T dH, dX = dH W1^T (a stands in for dH)
    p.push_back(dense_gemm(true, false, h, f, c.rows[e], row_at(c.x, c.offset[e], h, es_),
                           row_at(act, c.offset[e], f, es_), g + e * per, t, 1.f, 0.f));
    p.push_back(dense_gemm(false, true, c.rows[e], h, f, row_at(act, c.offset[e], f, es_), w1_at(e),
                           row_at(out, c.offset[e], h, es_), t));
  }
  run(p, s);
}

}  // namespace moebench
