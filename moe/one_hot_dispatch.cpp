#include "moe/one_hot_dispatch.h"
#include "kernels/gemm.h"
#include "kernels/looped_gating.h"
#include "kernels/permute.h"

namespace moebench {
namespace {

// The tensors are exact 0/1 masks and weights: the GEMMs run in full fp32 (no TF32 rounding of
// the token rows), as the gate's.
Exec fp32_exec(Device& dev, const Stream& s) {
  Exec ex = dev.exec(s);
  ex.tensor_cores = false;
  return ex;
}

struct Dims {
  int groups, tokens_per_group, padded_per_group;  // padded: E C
  std::size_t padded_rows() const { return std::size_t(groups) * padded_per_group; }
};
Dims dims(const OneHotMap& m) {
  const CapacityShape& c = m.shape;
  return Dims{c.groups, c.gate.tokens / c.groups, c.gate.experts * c.capacity};
}
RowMap padded_map(const OneHotMap& m, int hidden) {
  return RowMap{int(dims(m).padded_rows()), 1, hidden, m.padded_row_of.as<std::int32_t>()};
}
Buffer padded_buffer(TrackingAllocator& alloc, const OneHotMap& m, int hidden, const Stream& s) {
  return alloc.allocate(std::max<std::size_t>(dims(m).padded_rows(), 1) * hidden * 4, MemTag::temporary, s);
}

}  // namespace

OneHotMap build_one_hot_map(TrackingAllocator& alloc, HostStaging& upload, const Routing& r,
                            const std::vector<std::int32_t>& base, const Stream& s) {
  if (r.expert_slice) throw Error("--gate paper: its one-hot dispatch takes whole routings, not expert slices");
  OneHotMap m;
  m.shape = r.shape;
  m.combine = r.combine.as<float>();
  m.dispatch = r.dispatch.as<float>();
  m.expert = r.expert.as<std::int32_t>();
  m.position = r.position.as<std::int32_t>();
  m.weight = r.weight.as<float>();
  const int G = r.groups(), E = r.shape.gate.experts, C = r.shape.capacity;
  std::vector<std::int32_t> row_of(std::size_t(G) * E * C, -1);
  for (int g = 0; g < G; ++g)
    for (int e = 0; e < E; ++e) {
      const std::int32_t b = base[std::size_t(g) * E + e];
      if (b < 0) continue;
      for (int c = 0; c < r.kept[std::size_t(g) * E + e]; ++c) row_of[(std::size_t(g) * E + e) * C + c] = b + c;
    }
  m.padded_row_of = alloc.allocate(std::max<std::size_t>(row_of.size(), 1) * 4, MemTag::buffers, s);
  upload.upload(m.padded_row_of.data(), row_of.data(), row_of.size() * 4, s);
  return m;
}

void one_hot_dispatch(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* x, float* rows,
                      const Stream& s) {
  const Exec ex = fp32_exec(dev, s);
  const Dims d = dims(m);
  Buffer padded = padded_buffer(alloc, m, hidden, s);
  for (int g = 0; g < d.groups; ++g)  // 'TEC,TM->ECM'
    gemm(ex, dense_gemm(true, false, d.padded_per_group, hidden, d.tokens_per_group,
                        m.dispatch + std::size_t(g) * d.tokens_per_group * d.padded_per_group,
                        x + std::size_t(g) * d.tokens_per_group * hidden,
                        padded.as<float>() + std::size_t(g) * d.padded_per_group * hidden));
  dispatch_rows(ex, padded_map(m, hidden), padded.data(), rows, DType::f32);
}

void one_hot_combine(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* rows, float* y,
                     bool accumulate, const Stream& s) {
  const Exec ex = fp32_exec(dev, s);
  const Dims d = dims(m);
  Buffer padded = padded_buffer(alloc, m, hidden, s);
  dispatch_rows_backward(ex, padded_map(m, hidden), rows, padded.data(), false, DType::f32);  // empty slots: 0
  for (int g = 0; g < d.groups; ++g)  // 'TEC,ECM->TM'
    gemm(ex, dense_gemm(false, false, d.tokens_per_group, hidden, d.padded_per_group,
                        m.combine + std::size_t(g) * d.tokens_per_group * d.padded_per_group,
                        padded.as<float>() + std::size_t(g) * d.padded_per_group * hidden,
                        y + std::size_t(g) * d.tokens_per_group * hidden, DType::f32, 1.f, accumulate ? 1.f : 0.f));
}

void one_hot_combine_backward(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden, const float* dy,
                              const float* rows, float* drows, float* dweight, const Stream& s) {
  const Exec ex = fp32_exec(dev, s);
  const Dims d = dims(m);
  Buffer padded = padded_buffer(alloc, m, hidden, s);
  Buffer dpadded = padded_buffer(alloc, m, hidden, s);
  Buffer dcombine =
      alloc.allocate(std::max<std::size_t>(std::size_t(m.shape.gate.tokens) * d.padded_per_group, 1) * 4,
                     MemTag::temporary, s);
  dispatch_rows_backward(ex, padded_map(m, hidden), rows, padded.data(), false, DType::f32);
  for (int g = 0; g < d.groups; ++g) {
    const float* comb = m.combine + std::size_t(g) * d.tokens_per_group * d.padded_per_group;
    const float* dyg = dy + std::size_t(g) * d.tokens_per_group * hidden;
    const std::size_t po = std::size_t(g) * d.padded_per_group * hidden;
    gemm(ex, dense_gemm(true, false, d.padded_per_group, hidden, d.tokens_per_group, comb, dyg,
                        dpadded.as<float>() + po));
    gemm(ex, dense_gemm(false, true, d.tokens_per_group, d.padded_per_group, hidden, dyg, padded.as<float>() + po,
                        dcombine.as<float>() + std::size_t(g) * d.tokens_per_group * d.padded_per_group));
  }
  dispatch_rows(ex, padded_map(m, hidden), dpadded.data(), drows, DType::f32);
  gather_slot_grads(ex, m.shape, m.expert, m.position, dcombine.as<float>(), dweight);
}

void one_hot_dispatch_backward(Device& dev, TrackingAllocator& alloc, const OneHotMap& m, int hidden,
                               const float* drows, float* dx, bool accumulate, const Stream& s) {
  const Exec ex = fp32_exec(dev, s);
  const Dims d = dims(m);
  Buffer dpadded = padded_buffer(alloc, m, hidden, s);
  dispatch_rows_backward(ex, padded_map(m, hidden), drows, dpadded.data(), false, DType::f32);
  for (int g = 0; g < d.groups; ++g)
    gemm(ex, dense_gemm(false, false, d.tokens_per_group, hidden, d.padded_per_group,
                        m.dispatch + std::size_t(g) * d.tokens_per_group * d.padded_per_group,
                        dpadded.as<float>() + std::size_t(g) * d.padded_per_group * hidden,
                        dx + std::size_t(g) * d.tokens_per_group * hidden, DType::f32, 1.f, accumulate ? 1.f : 0.f));
}

}  // namespace moebench
