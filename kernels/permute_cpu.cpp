#include <cstring>
#include <string>
#include "kernels/permute.h"
#include <algorithm>
#include "kernels/host_widen.h"

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

// Rows in expert-major order the map reaches (read when the op runs: the map may come from an
// op queued before it).
static std::size_t mapped_rows(const RowMap& m) {
  std::int32_t last = -1;
  for (std::size_t i = 0; i < std::size_t(m.tokens) * m.slots; ++i) last = std::max(last, m.row_of[i]);
  return std::size_t(last + 1);
}

void dispatch_rows(const Exec& ex, const RowMap& m, const void* x, void* rows, DType t) {
  if (ex.backend == Backend::cuda) return dispatch_rows_cuda(m, x, rows, t, ex.stream);
  run_host(ex, "dispatch_rows", [=] {
    WidenedView in(x, t, std::size_t(m.tokens) * m.hidden, true), out(rows, t, mapped_rows(m) * m.hidden, true);  // rows it does not map keep theirs
    dispatch_rows_cpu(m, in.data(), out.data());
    out.narrow();
  });
}
void combine_rows(const Exec& ex, const RowMap& m, const void* rows, const float* weight, void* out, DType t,
                  bool accumulate) {
  if (ex.backend == Backend::cuda) return combine_rows_cuda(m, rows, weight, out, accumulate, t, ex.stream);
  run_host(ex, "combine_rows", [=] {
    WidenedView in(rows, t, mapped_rows(m) * m.hidden, true), y(out, t, std::size_t(m.tokens) * m.hidden, accumulate);
    combine_rows_cpu(m, in.data(), weight, y.data(), accumulate);
    y.narrow();
  });
}
void combine_rows_backward(const Exec& ex, const RowMap& m, const void* dout, const void* rows, const float* weight,
                           void* drows, float* dweight, DType t, bool slice) {
  if (ex.backend == Backend::cuda)
    return combine_rows_backward_cuda(m, dout, rows, weight, drows, dweight, slice, t, ex.stream);
  run_host(ex, "combine_rows_backward", [=] {
    const std::size_t r = mapped_rows(m) * m.hidden;
    WidenedView dy(dout, t, std::size_t(m.tokens) * m.hidden, true), in(rows, t, r, true), out(drows, t, r, true);
    combine_rows_backward_cpu(m, dy.data(), in.data(), weight, out.data(), dweight, slice);
    out.narrow();
  });
}
void dispatch_rows_backward(const Exec& ex, const RowMap& m, const void* drows, void* dx, bool accumulate, DType t) {
  if (ex.backend == Backend::cuda) return dispatch_rows_backward_cuda(m, drows, dx, accumulate, t, ex.stream);
  run_host(ex, "dispatch_rows_backward", [=] {
    WidenedView in(drows, t, mapped_rows(m) * m.hidden, true), out(dx, t, std::size_t(m.tokens) * m.hidden, accumulate);
    dispatch_rows_backward_cpu(m, in.data(), out.data(), accumulate);
    out.narrow();
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
