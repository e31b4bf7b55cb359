#include "kernels/gelu.h"
#include <string>
#include <vector>
#include "kernels/gelu_math.h"
#include "kernels/host_widen.h"

namespace moebench {

void gelu_forward_cpu(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) y[i] = gelu_math::forward(x[i]);
}

void gelu_backward_cpu(const float* x, const float* dy, float* dx, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = dy[i] * gelu_math::derivative(x[i]);
}

void gelu_forward(const Exec& ex, const void* x, void* y, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_forward_cuda(x, y, n, t, ex.stream);
  run_host(ex, "gelu_forward", [=] {
    WidenedView in(x, t, n, true), out(y, t, n, false);
    gelu_forward_cpu(in.data(), out.data(), n);
    out.narrow();
  });
}

void gelu_backward(const Exec& ex, const void* x, const void* dy, void* dx, std::size_t n, DType t) {
  if (ex.backend == Backend::cuda) return gelu_backward_cuda(x, dy, dx, n, t, ex.stream);
  run_host(ex, "gelu_backward", [=] {
    WidenedView in(x, t, n, true), grad(dy, t, n, true), out(dx, t, n, false);
    gelu_backward_cpu(in.data(), grad.data(), out.data(), n);
    out.narrow();
  });
}

void gelu_backward_in_blocks(const Exec& ex, const RowPadding& p, const void* x, void* d) {
  if (p.offset.empty() || p.padded < 0 || p.width < 0)
    throw Error("gelu_backward_in_blocks: a layout of " + std::to_string(p.offset.size()) + " expert offsets, blocks of " +
                std::to_string(p.padded) + " rows, " + std::to_string(p.width) + " wide");
  if (ex.backend == Backend::cuda) return gelu_backward_in_blocks_cuda(p, x, d, ex.stream);
  std::string details;  // the rows it reads against the layout's
  if (records_details(ex))
    details = "\"rows\": " + std::to_string(p.offset.back() - p.offset.front()) +
              ", \"layout_rows\": " + std::to_string(padded_starts(p.offset, p.padded).back());
  run_host(ex, "gelu_backward_in_blocks", [=] {
    const std::vector<std::size_t> start = padded_starts(p.offset, p.padded);
    const std::size_t width = std::size_t(p.width), row_bytes = width * dtype_size(p.dtype);
    for (int e = 0; e < p.experts(); ++e) {  // its rows: at the start of its block, or in the overflow
      const std::size_t n = p.rows(e) * width;
      if (n == 0) continue;
      const char* xe = static_cast<const char*>(x) + start[e] * row_bytes;
      char* de = static_cast<char*>(d) + start[e] * row_bytes;
      WidenedView in(xe, p.dtype, n, true), grad(de, p.dtype, n, true);
      gelu_backward_cpu(in.data(), grad.data(), grad.data(), n);
      grad.narrow();
    }
  }, details);
}

#if !MOEBENCH_WITH_CUDA
void gelu_forward_cuda(const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_forward"); }
void gelu_backward_cuda(const void*, const void*, void*, std::size_t, DType, void*) { cuda_not_built("gelu_backward"); }
void gelu_backward_in_blocks_cuda(const RowPadding&, const void*, void*, void*) { cuda_not_built("gelu_backward_in_blocks"); }
#endif

}  // namespace moebench
