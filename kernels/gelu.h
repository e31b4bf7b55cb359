// GeLU (tanh approximation, as in GPT-2/Megatron) forward and backward, elementwise.
// CPU: fp32 reference (16-bit storage widened, kernels/host_widen.h). CUDA: fp32/fp16/bf16 storage with fp32 arithmetic.
#pragma once
#include <cstddef>
#include "kernels/dtype.h"
#include "kernels/exec.h"
#include "kernels/pad_rows.h"

namespace moebench {

void gelu_forward_cpu(const float* x, float* y, std::size_t n);
// dx = dy * gelu'(x); dx may alias dy.
void gelu_backward_cpu(const float* x, const float* dy, float* dx, std::size_t n);

void gelu_forward_cuda(const void* x, void* y, std::size_t n, DType t, void* stream);
void gelu_backward_cuda(const void* x, const void* dy, void* dx, std::size_t n, DType t, void* stream);

void gelu_forward(const Exec& ex, const void* x, void* y, std::size_t n, DType t);
void gelu_backward(const Exec& ex, const void* x, const void* dy, void* dx, std::size_t n, DType t);

// GeLU's gradient in place, d = d * gelu'(x), over the rows of the padded experts' layout
// (kernels/pad_rows.h) that hold an expert's rows: each block's first rows, and the overflow.
// The padding rows are left as they are: there x and d are zero (GEMMs over zero rows), and a
// zero d stays zero, so reading them would only cost their bytes (the layer bench's
// computed_rows_over_routed says how many there are).
void gelu_backward_in_blocks(const Exec& ex, const RowPadding& p, const void* x, void* d);
void gelu_backward_in_blocks_cuda(const RowPadding& p, const void* x, void* d, void* stream);

}  // namespace moebench
