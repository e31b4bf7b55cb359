#include <cstring>
#include <string>
#include "kernels/permute.h"

namespace moebench {

void build_row_map_cpu(const RowMapSource& src, std::int32_t* row_of) {
  const int per_group = src.tokens / src.groups;
  for (int t = 0; t < src.tokens; ++t)
    for (int s = 0; s < src.slots; ++s) {
      const std::size_t slot = std::size_t(t) * src.slots + s;
      const std::int32_t pos = src.position[slot];
      const std::int32_t b = src.base[std::size_t(t / per_group) * src.experts + src.expert[slot]];
      row_of[slot] = (pos >= 0 && b >= 0) ? b + pos : -1;
    }
}

void build_row_map(const Exec& ex, const RowMapSource& src, std::int32_t* row_of) {
  if (ex.backend == Backend::cuda) return build_row_map_cuda(src, row_of, ex.stream);
  run_host(ex, "build_row_map", [=] { build_row_map_cpu(src, row_of); });
}

void dispatch_rows_cpu(const RowMap& m, const float* x, float* rows) {
  for (int t = 0; t < m.tokens; ++t)
    for (int s = 0; s < m.slots; ++s) {
      const std::int32_t r = m.row_of[std::size_t(t) * m.slots + s];
      if (r >= 0) std::memcpy(rows + std::size_t(r) * m.hidden, x + std::size_t(t) * m.hidden, sizeof(float) * m.hidden);
    }
}

void combine_rows_cpu(const RowMap& m, const float* rows, const float* weight, float* out, bool accumulate) {
  for (int t = 0; t < m.tokens; ++t) {
    float* o = out + std::size_t(t) * m.hidden;
    if (!accumulate) std::memset(o, 0, sizeof(float) * m.hidden);
    for (int s = 0; s < m.slots; ++s) {
      const std::size_t slot = std::size_t(t) * m.slots + s;
      const std::int32_t r = m.row_of[slot];
      if (r < 0) continue;
      const float w = weight[slot];
      const float* y = rows + std::size_t(r) * m.hidden;
      for (int i = 0; i < m.hidden; ++i) o[i] += w * y[i];
    }
  }
}

void combine_rows_backward_cpu(const RowMap& m, const float* dout, const float* rows, const float* weight,
                               float* drows, float* dweight, bool slice) {
  for (int t = 0; t < m.tokens; ++t)
    for (int s = 0; s < m.slots; ++s) {
      const std::size_t slot = std::size_t(t) * m.slots + s;
      const std::int32_t r = m.row_of[slot];
      if (r < 0) {
        if (!slice) dweight[slot] = 0.f;
        continue;
      }
      const float* d = dout + std::size_t(t) * m.hidden;
      const float* y = rows + std::size_t(r) * m.hidden;
      float* dr = drows + std::size_t(r) * m.hidden;
      float dot = 0.f;
      for (int i = 0; i < m.hidden; ++i) {
        dot += d[i] * y[i];
        dr[i] = weight[slot] * d[i];
      }
      dweight[slot] = dot;
    }
}

void dispatch_rows_backward_cpu(const RowMap& m, const float* drows, float* dx, bool accumulate) {
  for (int t = 0; t < m.tokens; ++t) {
    float* o = dx + std::size_t(t) * m.hidden;
    if (!accumulate) std::memset(o, 0, sizeof(float) * m.hidden);
    for (int s = 0; s < m.slots; ++s) {
      const std::int32_t r = m.row_of[std::size_t(t) * m.slots + s];
      if (r < 0) continue;
      const float* d = drows + std::size_t(r) * m.hidden;
      for (int i = 0; i < m.hidden; ++i) o[i] += d[i];
    }
  }
}

static void require_f32(DType t, const char* op) {
  if (t != DType::f32) throw Error(std::string(op) + ": the CPU backend computes in fp32 only");
}

void dispatch_rows(const Exec& ex, const RowMap& m, const void* x, void* rows, DType t) {
  if (ex.backend == Backend::cuda) return dispatch_rows_cuda(m, x, rows, t, ex.stream);
  require_f32(t, "dispatch_rows");
  run_host(ex, "dispatch_rows", [=] { dispatch_rows_cpu(m, static_cast<const float*>(x), static_cast<float*>(rows)); });
}
void combine_rows(const Exec& ex, const RowMap& m, const void* rows, const float* weight, void* out, DType t,
                  bool accumulate) {
  if (ex.backend == Backend::cuda) return combine_rows_cuda(m, rows, weight, out, accumulate, t, ex.stream);
  require_f32(t, "combine_rows");
  run_host(ex, "combine_rows", [=] {
    combine_rows_cpu(m, static_cast<const float*>(rows), weight, static_cast<float*>(out), accumulate);
  });
}
void combine_rows_backward(const Exec& ex, const RowMap& m, const void* dout, const void* rows, const float* weight,
                           void* drows, float* dweight, DType t, bool slice) {
  if (ex.backend == Backend::cuda)
    return combine_rows_backward_cuda(m, dout, rows, weight, drows, dweight, slice, t, ex.stream);
  require_f32(t, "combine_rows_backward");
  run_host(ex, "combine_rows_backward", [=] {
    combine_rows_backward_cpu(m, static_cast<const float*>(dout), static_cast<const float*>(rows), weight,
                              static_cast<float*>(drows), dweight, slice);
  });
}
void dispatch_rows_backward(const Exec& ex, const RowMap& m, const void* drows, void* dx, bool accumulate, DType t) {
  if (ex.backend == Backend::cuda) return dispatch_rows_backward_cuda(m, drows, dx, accumulate, t, ex.stream);
  require_f32(t, "dispatch_rows_backward");
  run_host(ex, "dispatch_rows_backward", [=] {
    dispatch_rows_backward_cpu(m, static_cast<const float*>(drows), static_cast<float*>(dx), accumulate);
  });
}

#if !MOEBENCH_WITH_CUDA
void build_row_map_cuda(const RowMapSource&, std::int32_t*, void*) { cuda_not_built("build_row_map"); }
void dispatch_rows_cuda(const RowMap&, const void*, void*, DType, void*) { cuda_not_built("dispatch_rows"); }
void combine_rows_cuda(const RowMap&, const void*, const float*, void*, bool, DType, void*) {
  cuda_not_built("combine_rows");
}
void combine_rows_backward_cuda(const RowMap&, const void*, const void*, const float*, void*, float*, bool, DType, void*) {
  cuda_not_built("combine_rows_backward");
}
void dispatch_rows_backward_cuda(const RowMap&, const void*, void*, bool, DType, void*) {
  cuda_not_built("dispatch_rows_backward");
}
#endif

}  // namespace moebench
