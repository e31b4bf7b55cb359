#include "gpt/gpt_layout.h"
#include <cmath>
#include <vector>
#include "moe/init.h"
#include "models/layout_rules.h"

namespace moebench {

LayoutGroups make_layout_groups(Communicator& world, const ParallelLayout& l) {
  LayoutGroups g;
  const int r = world.rank();
  g.stage = l.pp_index(r);
  g.dp_rank = l.dp_index(r);
  g.tp_rank = l.tp_index(r);
  g.tp = world.split(l.tp_color(r), g.tp_rank);
  g.dp = world.split(l.dp_color(r), g.dp_rank);
  g.pp = world.split(l.pp_color(r), g.stage);
  return g;
}

GptConfig layout_model(const ModelShape& shape, const ParallelLayout& l, DType dtype) {
  return gpt_config(l.kind == LayoutKind::dense ? shape.dense() : shape, dtype);
}

DispatcherFactory layout_dispatcher(const ParallelLayout& l, LayoutGroups& g) {
  if (l.kind == LayoutKind::dpmoe)
    return [comm = g.dp.get()](const DispatcherEnv& env) { return make_expert_parallel_dispatcher(env, *comm); };
  if (l.kind == LayoutKind::ppmoe)
    return [comm = g.tp.get()](const DispatcherEnv& env) { return make_ppmoe_dispatcher(env, *comm); };
  return {};
}

std::optional<double> expert_load(const Runtime& rt, std::int64_t rows) {
  const std::int64_t all_rows = rt.sum(rows);
  if (all_rows <= 0) return std::nullopt;
  return rt.max(double(rows)) / (double(all_rows) / rt.world());
}

Buffer synthetic_tokens(Device& dev, TrackingAllocator& alloc, const Stream& s, int rows, int vocab, std::uint64_t seed,
                        std::uint64_t id) {
  const auto v = normal_vector(std::size_t(rows), seed, id, 1.f);
  std::vector<std::int32_t> host(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) host[i] = std::int32_t(std::abs(v[i]) * 997) % vocab;
  Buffer b = alloc.allocate(host.size() * 4, MemTag::buffers);
  dev.copy_to_device(b.data(), host.data(), host.size() * 4, s);
  s.synchronize();  // the host vector goes out of scope
  return b;
}

std::optional<std::string> validate_layout(const ParallelLayout& l, const ModelShape& shape, int world_size) {
  if (l.dp * l.tp * l.pp != world_size)
    return "--ranks: " + std::to_string(world_size) + " ranks, but the layout " + l.describe() + " needs DP x TP x PP = " +
           std::to_string(l.dp * l.tp * l.pp);
  if (auto e = trainer_layout_error(shape, l.kind, l.dp, l.tp, l.pp)) return e;
  return GptStage::validate(layout_model(shape, l), l.pp, l.tp);  // what the stage adds: the dtype, the gate
}

}  // namespace moebench
