#include "moe/dispatcher_rows.h"

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
  return m;
}

}  // namespace moebench
