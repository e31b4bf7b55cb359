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

void RowMapper::build(const Routing& r, const std::vector<std::int32_t>& base) {
  tokens_ = r.tokens();
  slots_ = r.slots();
  const Stream& s = dev_.default_stream();
  alloc_.reserve(base_, base.size() * 4, MemTag::buffers);
  alloc_.reserve(row_of_, std::size_t(tokens_) * slots_ * 4, MemTag::activations);
  base_upload_.upload(base_.data(), base.data(), base.size() * 4, s);
  RowMapSource src{tokens_, slots_, r.shape.gate.experts, r.groups(), r.expert.as<std::int32_t>(),
                   r.position.as<std::int32_t>(), base_.as<std::int32_t>()};
  build_row_map(dev_.exec(s), src, row_of_.as<std::int32_t>());
}

}  // namespace moebench
