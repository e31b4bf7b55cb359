#include "moe/dispatcher_rows.h"
#include <algorithm>
#include "kernels/pad_rows.h"
#include "kernels/segment_offsets.h"
#include "moe/padded_blocks.h"

namespace moebench {

std::vector<int> expert_major_bases(const Routing& r, int first, int count, std::vector<std::int32_t>& base) {
  const int G = r.groups(), E = r.shape.gate.experts;
  base.assign(std::size_t(G) * E, -1);
  std::vector<int> rows(count, 0);
  std::int32_t next = 0;
  for (int l = 0; l < count; ++l) {
    const int e = first + l;
    for (int g = 0; g < G; ++g) {
      base[std::size_t(g) * E + e] = next;
      next += r.kept[std::size_t(g) * E + e];
      rows[l] += r.kept[std::size_t(g) * E + e];
    }
  }
  return rows;
}

std::vector<int> padded_expert_bases(const Routing& r, int first, int count, const PaddedBlockCost& cost,
                                     std::vector<std::int32_t>& base, int* padded) {
  const std::vector<int> rows = expert_major_bases(r, first, count, base);
  const int P = padded_block_rows(rows, cost);
  const std::vector<std::size_t> offset = row_offsets(rows);
  const std::vector<std::size_t> start = padded_starts(offset, P);
  const int G = r.groups(), E = r.shape.gate.experts;
  for (int l = 0; l < count; ++l) {  // shift expert l from its packed start to its block's or overflow's
    const std::int32_t shift = std::int32_t(start[l]) - std::int32_t(offset[l]);
    for (int g = 0; g < G; ++g) base[std::size_t(g) * E + first + l] += shift;
  }
  *padded = P;
  return rows;
}

RowMapping build_row_mapping(Device& dev, TrackingAllocator& alloc, HostStaging& upload, const Routing& r,
                             const std::vector<std::int32_t>& base, const Stream& s) {
  RowMapping m;
  m.tokens = r.tokens();
  m.slots = r.slots();
  m.base = alloc.allocate(base.size() * 4, MemTag::buffers, s);
  m.row_of = alloc.allocate(std::size_t(m.tokens) * m.slots * 4, MemTag::activations, s);
  upload.upload(m.base.data(), base.data(), base.size() * 4, s);
  RowMapSource src{m.tokens, m.slots, r.shape.gate.experts, r.groups(), r.expert.as<std::int32_t>(),
                   r.position.as<std::int32_t>(), m.base.as<std::int32_t>()};
  build_row_map(dev.exec(s), src, m.row_of.as<std::int32_t>());
  if (r.one_hot()) m.one_hot = build_one_hot_map(alloc, upload, r, base, s);
  return m;
}

RowMapping build_row_mapping_on_device(Device& dev, TrackingAllocator& alloc, const Routing& r, int first, int count,
                                       Buffer& offset, const Stream& s) {
  if (r.one_hot()) throw Error("the paper gate's one-hot maps are built from host counts; its routing has no device layout");
  RowMapping m;
  m.tokens = r.tokens();
  m.slots = r.slots();
  const int G = r.groups(), E = r.shape.gate.experts;
  m.base = alloc.allocate(std::size_t(G) * E * 4, MemTag::buffers, s);
  m.row_of = alloc.allocate(std::size_t(m.tokens) * m.slots * 4, MemTag::activations, s);
  offset = alloc.allocate(std::size_t(count + 1) * 4, MemTag::buffers, s);
  const Exec ex = dev.exec(s);
  segment_offsets(ex, SegmentOffsetsArgs{G, E, first, count, r.kept_dev(), m.base.as<std::int32_t>(), offset.as<std::int32_t>()});
  build_row_map(ex, RowMapSource{m.tokens, m.slots, E, G, r.expert.as<std::int32_t>(), r.position.as<std::int32_t>(),
                                 m.base.as<std::int32_t>()},
                m.row_of.as<std::int32_t>());
  return m;
}

void move_dispatch(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t, const void* x,
                   void* rows, const Stream& s) {
  if (m.one_hot)
    return one_hot_dispatch(dev, alloc, *m.one_hot, hidden, static_cast<const float*>(x), static_cast<float*>(rows), s);
  dispatch_rows(dev.exec(s), m.map(hidden), x, rows, t);
}

void move_combine(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t, const void* rows,
                  const float* weight, void* y, bool accumulate, const Stream& s) {
  if (m.one_hot)
    return one_hot_combine(dev, alloc, *m.one_hot, hidden, static_cast<const float*>(rows), static_cast<float*>(y),
                           accumulate, s);
  combine_rows(dev.exec(s), m.map(hidden), rows, weight, y, t, accumulate);
}

void move_combine_backward(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t,
                           const void* dy, const void* rows, const float* weight, void* drows, float* dweight,
                           bool slice, const Stream& s) {
  if (m.one_hot)
    return one_hot_combine_backward(dev, alloc, *m.one_hot, hidden, static_cast<const float*>(dy),
                                    static_cast<const float*>(rows), static_cast<float*>(drows), dweight, s);
  combine_rows_backward(dev.exec(s), m.map(hidden), dy, rows, weight, drows, dweight, t, slice);
}

void move_dispatch_backward(Device& dev, TrackingAllocator& alloc, const RowMapping& m, int hidden, DType t,
                            const void* drows, void* dx, bool accumulate, const Stream& s) {
  if (m.one_hot)
    return one_hot_dispatch_backward(dev, alloc, *m.one_hot, hidden, static_cast<const float*>(drows),
                                     static_cast<float*>(dx), accumulate, s);
  dispatch_rows_backward(dev.exec(s), m.map(hidden), drows, dx, accumulate, t);
}

}  // namespace moebench
