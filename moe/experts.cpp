#include "moe/experts.h"
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
  pointers_ = alloc_.allocate(grouped_gemm_workspace_bytes(std::size_t(2 * count)), MemTag::buffers);
}

void Experts::init(std::uint64_t seed) {
  const std::size_t per = std::size_t(cfg_.hidden) * cfg_.ffn;
  const Stream& s = dev_.default_stream();
  Buffer staging;
  if (cfg_.dtype != DType::f32) staging = alloc_.allocate(per * 4, MemTag::temporary);
  for (int i = 0; i < count_; ++i) {
    const std::uint64_t e = std::uint64_t(first_ + i);
    for (int which = 0; which < 2; ++which) {
      const auto w = normal_vector(per, seed, 1000 + 2 * e + which, 0.02f);
      char* dst = static_cast<char*>(which == 0 ? w1_.data() : w2_.data()) + i * per * es_;
      if (cfg_.dtype == DType::f32) {
        dev_.copy_to_device(dst, w.data(), per * 4, s);
      } else {
        dev_.copy_to_device(staging.data(), w.data(), per * 4, s);
        convert_cuda(staging.data(), DType::f32, dst, cfg_.dtype, per, s.handle);
      }
    }
  }
  dev_.fill_zero(w1_grad_.data(), w1_grad_.bytes(), s);
  dev_.fill_zero(w2_grad_.data(), w2_grad_.bytes(), s);
  dev_.synchronize();
}

const char* Experts::w1_at(int e) const { return static_cast<const char*>(w1_.data()) + std::size_t(e) * cfg_.hidden * cfg_.ffn * es_; }
const char* Experts::w2_at(int e) const { return static_cast<const char*>(w2_.data()) + std::size_t(e) * cfg_.hidden * cfg_.ffn * es_; }

void Experts::run(std::vector<GemmArgs>& problems) {
  grouped_gemm(dev_.exec(dev_.default_stream()), problems, cfg_.expert_gemm, pointers_.data(), pointers_.bytes());
}

double Experts::forward_flops() const {
  double f = 0;
  for (int r : rows_) f += 2 * gemm_flops(r, cfg_.ffn, cfg_.hidden);
  return f;
}

void Experts::forward(const void* x, const std::vector<int>& rows, void* y) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  x_ = x;
  rows_ = rows;
  offset_.assign(count_ + 1, 0);
  for (int e = 0; e < count_; ++e) offset_[e + 1] = offset_[e] + std::size_t(rows[e]);
  const std::size_t R = offset_[count_];
  alloc_.reserve(h_, std::max<std::size_t>(R, 1) * f * es_, MemTag::activations);
  alloc_.reserve(a_, std::max<std::size_t>(R, 1) * f * es_, MemTag::activations);
  auto at = [&](const void* base, std::size_t row, int width) {
    return static_cast<char*>(const_cast<void*>(base)) + row * width * es_;
  };
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e)
    p.push_back(dense_gemm(false, false, rows[e], f, h, at(x, offset_[e], h), w1_at(e), at(h_.data(), offset_[e], f), t));
  run(p);
  gelu_forward(dev_.exec(dev_.default_stream()), h_.data(), a_.data(), R * f, t);
  p.clear();
  for (int e = 0; e < count_; ++e)
    p.push_back(dense_gemm(false, false, rows[e], h, f, at(a_.data(), offset_[e], f), w2_at(e), at(y, offset_[e], h), t));
  run(p);
}

void Experts::backward(const void* dy, void* dx) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  const std::size_t R = offset_[count_], per = std::size_t(h) * f * es_;
  alloc_.reserve(da_, std::max<std::size_t>(R, 1) * f * es_, MemTag::temporary);
  auto at = [&](const void* base, std::size_t row, int width) {
    return static_cast<char*>(const_cast<void*>(base)) + row * width * es_;
  };
  char* g1 = static_cast<char*>(w1_grad_.data());
  char* g2 = static_cast<char*>(w2_grad_.data());
  // dA = dY W2^T and dW2 = A^T dY are independent: one grouped call.
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e) {
    p.push_back(dense_gemm(false, true, rows_[e], f, h, at(dy, offset_[e], h), w2_at(e), at(da_.data(), offset_[e], f), t));
    p.push_back(dense_gemm(true, false, f, h, rows_[e], at(a_.data(), offset_[e], f), at(dy, offset_[e], h), g2 + e * per, t));
  }
  run(p);
  gelu_backward(dev_.exec(dev_.default_stream()), h_.data(), da_.data(), da_.data(), R * f, t);
  // dW1 = X^T dH and dX = dH W1^T.
  p.clear();
  for (int e = 0; e < count_; ++e) {
    p.push_back(dense_gemm(true, false, h, f, rows_[e], at(x_, offset_[e], h), at(da_.data(), offset_[e], f), g1 + e * per, t));
    p.push_back(dense_gemm(false, true, rows_[e], h, f, at(da_.data(), offset_[e], f), w1_at(e), at(dx, offset_[e], h), t));
  }
  run(p);
}

void Experts::gemms_only(TrackingAllocator& scratch_alloc) {
  const int h = cfg_.hidden, f = cfg_.ffn;
  const DType t = cfg_.dtype;
  const std::size_t per = std::size_t(h) * f * es_, R = std::max<std::size_t>(offset_[count_], 1);
  auto at = [&](const void* base, std::size_t row, int width) {
    return static_cast<char*>(const_cast<void*>(base)) + row * width * es_;
  };
  scratch_alloc.reserve(scratch_rows_, R * std::max(h, f) * es_, MemTag::temporary);
  scratch_alloc.reserve(scratch_weights_, std::size_t(count_) * per, MemTag::temporary);
  void* out = scratch_rows_.data();
  char* g = static_cast<char*>(scratch_weights_.data());  // stands in for both weight gradients
  std::vector<GemmArgs> p;
  for (int e = 0; e < count_; ++e)  // H = X W1
    p.push_back(dense_gemm(false, false, rows_[e], f, h, at(x_, offset_[e], h), w1_at(e), at(out, offset_[e], f), t));
  run(p);
  p.clear();
  for (int e = 0; e < count_; ++e)  // Y = A W2
    p.push_back(dense_gemm(false, false, rows_[e], h, f, at(a_.data(), offset_[e], f), w2_at(e), at(out, offset_[e], h), t));
  run(p);
  p.clear();
  for (int e = 0; e < count_; ++e) {  // dA = dY W2^T, dW2 = A^T dY (x stands in for dY)
    p.push_back(dense_gemm(false, true, rows_[e], f, h, at(x_, offset_[e], h), w2_at(e), at(out, offset_[e], f), t));
    p.push_back(dense_gemm(true, false, f, h, rows_[e], at(a_.data(), offset_[e], f), at(x_, offset_[e], h), g + e * per, t));
  }
  run(p);
  p.clear();
  for (int e = 0; e < count_; ++e) {  // dW1 = X^T dH, dX = dH W1^T (a stands in for dH)
    p.push_back(dense_gemm(true, false, h, f, rows_[e], at(x_, offset_[e], h), at(a_.data(), offset_[e], f), g + e * per, t));
    p.push_back(dense_gemm(false, true, rows_[e], h, f, at(a_.data(), offset_[e], f), w1_at(e), at(out, offset_[e], h), t));
  }
  run(p);
}

}  // namespace moebench
