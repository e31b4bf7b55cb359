#include "kernels/layernorm.h"
#include "kernels/host_widen.h"
#include <cmath>
#include <string>
#include <vector>

namespace moebench {

void layernorm_forward_cpu(const LayerNormShape& s, const float* x, const float* gamma, const float* beta, float* y,
                           float* mean, float* rstd) {
  for (int r = 0; r < s.rows; ++r) {
    const float* xr = x + std::size_t(r) * s.cols;
    double sum = 0, sq = 0;
    for (int c = 0; c < s.cols; ++c) sum += xr[c];
    const double mu = sum / s.cols;
    for (int c = 0; c < s.cols; ++c) sq += (xr[c] - mu) * (xr[c] - mu);
    const double rs = 1.0 / std::sqrt(sq / s.cols + kLayerNormEps);
    mean[r] = float(mu);
    rstd[r] = float(rs);
    float* yr = y + std::size_t(r) * s.cols;
    for (int c = 0; c < s.cols; ++c) yr[c] = float((xr[c] - mu) * rs) * gamma[c] + beta[c];
  }
}

void layernorm_backward_cpu(const LayerNormShape& s, const float* x, const float* dy, const float* gamma, const float* mean,
                            const float* rstd, float* dx, float* dgamma, float* dbeta) {
  std::vector<double> dg(s.cols, 0.0), db(s.cols, 0.0);
  for (int r = 0; r < s.rows; ++r) {
    const float *xr = x + std::size_t(r) * s.cols, *dyr = dy + std::size_t(r) * s.cols;
    double a = 0, b = 0;  // means of dy gamma and of dy gamma xhat
    for (int c = 0; c < s.cols; ++c) {
      const double xhat = (xr[c] - mean[r]) * double(rstd[r]), g = double(dyr[c]) * gamma[c];
      a += g;
      b += g * xhat;
      dg[c] += double(dyr[c]) * xhat;
      db[c] += dyr[c];
    }
    a /= s.cols;
    b /= s.cols;
    float* dxr = dx + std::size_t(r) * s.cols;
    for (int c = 0; c < s.cols; ++c) {
      const double xhat = (xr[c] - mean[r]) * double(rstd[r]);
      dxr[c] = float(rstd[r] * (double(dyr[c]) * gamma[c] - a - xhat * b));
    }
  }
  for (int c = 0; c < s.cols; ++c) {
    dgamma[c] += float(dg[c]);
    dbeta[c] += float(db[c]);
  }
}

static void check(const LayerNormShape& s, DType t, const char* op) {
  if (s.rows < 0 || s.cols < 1) throw Error(std::string(op) + ": " + std::to_string(s.rows) + " rows of " + std::to_string(s.cols) + " columns");
  if (!is_float(t)) throw Error(std::string(op) + ": " + std::string(dtype_name(t)) + " data; allowed: fp32, fp16 and bf16");
}

void layernorm_forward(const Exec& ex, const LayerNormShape& s, const void* x, const float* gamma, const float* beta,
                       void* y, float* mean, float* rstd, DType t) {
  check(s, t, "layernorm_forward");
  if (ex.backend == Backend::cuda) return layernorm_forward_cuda(s, x, gamma, beta, y, mean, rstd, t, ex.stream);
  run_host(ex, "layernorm_forward", [=] {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    WidenedView in(x, t, n, true), out(y, t, n, false);
    layernorm_forward_cpu(s, in.data(), gamma, beta, out.data(), mean, rstd);
    out.narrow();
  });
}

void layernorm_backward(const Exec& ex, const LayerNormShape& s, const void* x, const void* dy, const float* gamma,
                        const float* mean, const float* rstd, void* dx, float* dgamma, float* dbeta, DType t) {
  check(s, t, "layernorm_backward");
  if (ex.backend == Backend::cuda)
    return layernorm_backward_cuda(s, x, dy, gamma, mean, rstd, dx, dgamma, dbeta, t, ex.stream);
  run_host(ex, "layernorm_backward", [=] {
    const std::size_t n = std::size_t(s.rows) * s.cols;
    WidenedView in(x, t, n, true), grad(dy, t, n, true), out(dx, t, n, false);
    layernorm_backward_cpu(s, in.data(), grad.data(), gamma, mean, rstd, out.data(), dgamma, dbeta);
    out.narrow();
  });
}

#if !MOEBENCH_WITH_CUDA
void layernorm_forward_cuda(const LayerNormShape&, const void*, const float*, const float*, void*, float*, float*, DType, void*) {
  cuda_not_built("layernorm_forward");
}
void layernorm_backward_cuda(const LayerNormShape&, const void*, const void*, const float*, const float*, const float*, void*,
                             float*, float*, DType, void*) {
  cuda_not_built("layernorm_backward");
}
#endif

}  // namespace moebench
