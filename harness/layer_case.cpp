#include "harness/layer_case.h"
#include <algorithm>
#include <cstdio>
#include "harness/csv.h"
#include "harness/layer_dump.h"
#include "models/roofline.h"
#include "moe/init.h"
#include "runtime/atomic_file.h"
#include "runtime/host_copy.h"

namespace moebench {

std::unique_ptr<LayerCase> make_layer_case(const std::string& dispatcher, const MoEConfig& c, Device& device,
                                           const MakeDispatcher& make, const LayerInputs& in) {
  const int T = in.tokens, h = c.hidden;
  const Stream& s = device.default_stream();
  auto lc = std::make_unique<LayerCase>(device.backend(), s);
  lc->dispatcher = dispatcher;
  lc->layer = std::make_unique<MoELayer>(c, device, lc->alloc, make(DispatcherEnv{c, device, lc->alloc}));
  lc->layer->init(in.seed, s);
  const std::size_t first = std::size_t(in.token_block) * T * h;
  std::vector<float> x = normal_vector(std::size_t(T) * h, in.seed, 77, 1.f, first);
  if (in.popularity.kind != Popularity::Kind::natural) {  // the gate's weights are the same on every rank
    const std::vector<float> gate =
        host_f32(device, lc->alloc, lc->layer->gate().weight().data(), std::size_t(h) * c.experts, DType::f32);
    steer_tokens(x, T, h, 1.0, gate, c.experts, in.popularity, in.seed, first / h);
  }
  lc->x = device_from_f32(device, lc->alloc, x, c.dtype, MemTag::activations);
  lc->dy = device_from_f32(device, lc->alloc, normal_vector(std::size_t(T) * h, in.seed, 78, 1e-3f, first), c.dtype,
                           MemTag::activations);
  lc->y = lc->alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
  lc->dx = lc->alloc.allocate(std::size_t(T) * h * dtype_size(c.dtype), MemTag::activations);
  for (int i = 0; i < in.warmup; ++i) {
    MoEContext mb = lc->layer->forward(lc->x.data(), T, lc->y.data(), s);
    lc->layer->backward(mb, lc->dy.data(), lc->dx.data(), s);
  }
  device.synchronize();
  return lc;
}

// Routed and kept tokens per expert summed over the ranks whose tokens count.
static LoadStats global_load(const Runtime& rt, const Routing& r, int E, bool counts) {
  std::vector<double> both(2 * std::size_t(E), 0.0);  // [routed][kept]
  if (counts)
    for (std::size_t i = 0; i < r.routed.size(); ++i) {
      both[i % E] += r.routed[i];
      both[E + i % E] += r.kept[i];
    }
  rt.sum(both);
  std::vector<std::int32_t> routed(E), kept(E);
  for (int e = 0; e < E; ++e) {
    routed[e] = std::int32_t(both[e]);
    kept[e] = std::int32_t(both[E + e]);
  }
  return load_stats(routed, kept, E);
}

std::map<std::string, double> layer_counters(const Runtime& rt, const LayerCase& lc, bool counts_load) {
  MoELayer& layer = *lc.layer;  // experts() is not const; nothing here changes it
  const MoEConfig& c = layer.config();
  const ExpertsContext& ec = lc.last->experts;
  std::map<std::string, double> out;
  // The busiest rank's work: the layer ends when it does.
  const int es = int(dtype_size(c.dtype));
  const Work work = moe_layer_work(lc.last->tokens, c.hidden, c.ffn, c.experts, layer.experts().count(),
                                   double(ec.total_rows()), es);
  out["roofline_flops"] = rt.max(work.flops);
  out["roofline_bytes"] = rt.max(work.bytes);
  const Work experts = moe_expert_work(c.hidden, c.ffn, layer.experts().count(), double(ec.total_rows()), es);
  out["roofline_expert_flops"] = rt.max(experts.flops);
  out["roofline_expert_bytes"] = rt.max(experts.bytes);
  const LoadStats load = global_load(rt, lc.last->routing, c.experts, counts_load);
  out["dropped_fraction"] = load.dropped_fraction;
  out["load_cv"] = load.cv;
  out["busiest_over_mean"] = busiest_over_mean(load.routed);
  // What padding costs (--expert-gemm padded): rows the expert GEMMs compute over rows routed, on
  // the rank where it is largest; 1 for the routes that compute the rows alone.
  out["computed_over_routed_rows"] =
      rt.max(ec.total_rows() ? double(ec.computed_rows()) / double(ec.total_rows()) : 1.0);
  for (MemTag tag : {MemTag::model_states, MemTag::activations, MemTag::buffers, MemTag::temporary})
    out[std::string("peak_") + mem_tag_name(tag)] = rt.max(double(lc.alloc.peak(tag)));
  return out;
}

std::size_t largest_row(const std::vector<double>& rows, int ranks) {
  const std::size_t width = rows.size() / std::size_t(ranks);
  std::size_t best = 0;
  double best_sum = -1;
  for (std::size_t r = 0; r < std::size_t(ranks); ++r) {
    double sum = 0;
    for (std::size_t i = 0; i < width; ++i) sum += rows[r * width + i];
    if (sum > best_sum) best = r, best_sum = sum;
  }
  return best;
}

PhasesOverRanks phases_over_ranks(const Runtime& rt, const std::vector<double>& mine) {
  const std::size_t width = mine.size();
  std::vector<double> all(width * std::size_t(rt.world()), 0.0);
  std::copy(mine.begin(), mine.end(), all.begin() + std::ptrdiff_t(width * std::size_t(rt.rank())));
  rt.sum(all);
  const std::size_t r = largest_row(all, rt.world());
  PhasesOverRanks p{std::vector<double>(all.begin() + std::ptrdiff_t(r * width), all.begin() + std::ptrdiff_t((r + 1) * width)),
                    std::vector<double>(mine)};
  for (std::size_t row = 0; row < std::size_t(rt.world()); ++row)
    for (std::size_t i = 0; i < width; ++i) p.fastest_rank[i] = std::min(p.fastest_rank[i], all[row * width + i]);
  return p;
}

void dump_layer_case(const std::string& folder, int rank, Device& device, LayerCase& lc, const DumpMeta& m) {
  MoELayer& layer = *lc.layer;
  dump_layer_state(folder + "/rank" + std::to_string(rank) + "_", device, lc.alloc, layer, *lc.last,
                   LayerIO{lc.x.data(), lc.y.data(), lc.dy.data(), lc.dx.data()});
  if (rank != 0) return;
  const MoEConfig& c = layer.config();
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "{\"dispatcher\": \"%s\", \"ranks\": %d, \"tp\": %d, \"tokens_per_rank\": %d, \"hidden\": %d, "
                "\"ffn\": %d, \"experts\": %d, \"prototypes\": %d, \"top_k\": %d, \"capacity_factor\": %s, "
                "\"capacity_groups_per_rank\": %d, \"aux_loss\": %s, \"aux_coef\": %.9g, \"aux_grad_scale\": %.9g, "
                "\"dtype\": \"%s\", \"backend\": \"%s\"}\n",
                m.dispatcher.c_str(), m.ranks, m.tp, m.tokens_per_rank, c.hidden, c.ffn, c.experts, c.prototypes,
                c.top_k, c.capacity_factor ? fmt(*c.capacity_factor, 17).c_str() : "null",
                layer.dispatcher().capacity_groups(m.tokens_per_rank), c.aux_loss ? "true" : "false",
                double(c.aux_coef), double(layer.dispatcher().aux_grad_scale()), m.dtype.c_str(), m.backend.c_str());
  write_file_atomic(folder + "/meta.json", buf);
}

}  // namespace moebench
