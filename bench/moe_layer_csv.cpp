#include "bench/moe_layer_csv.h"
#include <cstdio>
#include "moe/dispatcher_table.h"

namespace moebench {

namespace {

// A layer cannot be faster than its own GEMMs: a median ratio below 1 means the overhead is
// below what this machine's timer noise resolves at this size, and is no result. (Single
// repetitions below 1 stay visible in the spread.)
std::optional<std::string> unresolved_reason(const Spread& total, const Spread& gem, const Spread& ratio) {
  if (ratio.median >= 1.0) return std::nullopt;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "layer %.3g ms measured below its own GEMMs %.3g ms: the overhead is below the timer noise at this size",
                total.median, gem.median);
  return std::string(buf);
}

// speed_vs_torch: PyTorch's fastest variant's time over ours, for the one-device (local) row.
std::vector<std::string> torch_cells(const LayerCsvRun& run, double ours_ms) {
  const std::optional<TorchRun>& t = run.torch;
  if (!t) {
    const std::string why = run.has_reference ? "n/a (no PyTorch variant ran)" : "n/a (no --reference)";
    return {"n/a", "n/a", "n/a", "n/a", "n/a", why, "n/a", "n/a"};
  }
  if (!dispatcher_row(run.dispatcher).one_device())
    return {t->variant, "n/a", "n/a", "n/a", "n/a", "n/a (PyTorch's layer runs on one device: see the local row)",
            t->torch, t->device};
  return {t->variant, fmt(t->ms), fmt(t->ms_min), fmt(t->ms_max), t->cell("busiest_over_mean_load"),
          fmt(t->ms / ours_ms, 4), t->torch, t->device};
}

}  // namespace

void write_layer_csv(const std::string& out_dir, const Provenance& provenance, const RunRecord& r, const LayerCsvRun& run) {
  const MoEConfig& c = run.moe.config;
  const std::string& d = run.dispatcher;
  std::vector<std::string> cols = {"dispatcher", "tokens_per_rank", "hidden", "ffn", "experts", "prototypes",
                                   "top_k", "capacity_factor", "expert_gemm", "gate", "gate_kernels", "total_ms",
                                   "total_ms_min", "total_ms_max", "total_ms_reps"};
  for (const auto& n : kLayerRanges)
    for (const char* suffix : {"_ms", "_ms_reps"}) cols.push_back(n + suffix);
  for (const auto& n : kExchangeRanges)
    for (const char* suffix : {"_fastest_rank_ms", "_fastest_rank_ms_reps"}) cols.push_back(n + suffix);
  for (const char* extra :
       {"expert_gemms_ms", "expert_gemms_ms_min", "expert_gemms_ms_max", "expert_gemms_over_floor", "overhead_ratio",
        "overhead_ratio_min", "overhead_ratio_max", "overhead_status", "target_ratio", "tokens_per_s",
        "peak_model_states_bytes", "peak_activations_bytes", "peak_buffers_bytes", "peak_temporary_bytes",
        "tokens_dropped_fraction", "load_cv", "popularity", "busiest_over_mean_load", "computed_rows_over_routed",
        "repetitions", "iterations", "torch_variant", "torch_ms", "torch_ms_min", "torch_ms_max",
        "torch_busiest_over_mean_load", "speed_vs_torch", "torch", "torch_device"})
    cols.push_back(extra);
  for (const auto& col : roofline_columns()) cols.push_back(col);
  CsvTable t(cols);
  const Spread total = r.time_ms(), gem = r.counter("expert_gemms_ms"), ratio = r.counter("overhead_ratio");
  const std::optional<std::string> unresolved = unresolved_reason(total, gem, ratio);
  const int tokens = run.moe.resolved_tokens;
  const bool half = dtype_size(c.dtype) == 2;
  std::vector<std::string> row = {d, std::to_string(tokens), std::to_string(c.hidden), std::to_string(c.ffn),
                                  std::to_string(c.experts), std::to_string(c.prototypes), std::to_string(c.top_k),
                                  c.capacity_factor ? fmt(*c.capacity_factor) : "dropless", run.moe.expert_gemm,
                                  gate_impl_name(c.gate), run.moe.gate_kernels_ran, fmt(total.median), fmt(total.min),
                                  fmt(total.max), repetitions_cell(r.ms())};
  for (const auto& n : kLayerRanges) {  // each repetition's, so a ratio of two ranges pairs them
    row.push_back(fmt(r.counter(n).median));
    row.push_back(repetitions_cell(r.counters.at(n)));
  }
  for (const auto& n : kExchangeRanges) {
    row.push_back(fmt(r.counter(n + kFastestRank).median));
    row.push_back(repetitions_cell(r.counters.at(n + kFastestRank)));
  }
  for (double v : {gem.median, gem.min, gem.max}) row.push_back(fmt(v));
  // The expert GEMMs alone against their own floor (models/roofline.h's moe_expert_work).
  const Work experts_work{r.counter("roofline_expert_flops").median, r.counter("roofline_expert_bytes").median};
  const RooflineProfile& roof = run.roofline;
  row.push_back(roof.hw ? fmt(roofline(experts_work, *roof.hw, half, roof.rate_scale, gem.median).time_over_floor, 4)
                        : "n/a (no profile of this device: --roofline-profile)");
  for (double v : {ratio.median, ratio.min, ratio.max}) row.push_back(unresolved ? "n/a" : fmt(v, 4));
  row.push_back(unresolved ? "unresolved: " + *unresolved : "ok");
  row.push_back(fmt(kOverheadTarget));
  row.push_back(fmt(tokens / (total.median / 1e3)));
  for (const char* k : {"peak_model_states", "peak_activations", "peak_buffers", "peak_temporary"})
    row.push_back(fmt(r.counter(k).max, 15));
  row.push_back(fmt(r.counter("dropped_fraction").median, 8));
  row.push_back(fmt(r.counter("load_cv").median, 8));
  row.push_back(run.popularity);
  row.push_back(fmt(r.counter("busiest_over_mean").median, 6));
  row.push_back(fmt(r.counter("computed_over_routed_rows").median, 6));
  row.push_back(std::to_string(r.repetitions()));
  row.push_back(std::to_string(r.iterations));
  for (auto& cell : torch_cells(run, total.median)) row.push_back(cell);
  const Work work{r.counter("roofline_flops").median, r.counter("roofline_bytes").median};
  for (auto& cell : roofline_cells(roof, work, half, total.median)) row.push_back(cell);
  t.add_row(row);
  t.write(out_dir + "/moe/layer_" + d + ".csv", provenance);
  if (unresolved)
    std::printf("moe_layer/%-16s total %9.3f ms  expert GEMMs %9.3f ms  overhead ratio: unresolved (%s)\n", d.c_str(),
                total.median, gem.median, unresolved->c_str());
  else
    std::printf("moe_layer/%-16s total %9.2f ms  expert GEMMs %9.2f ms  overhead ratio %.3f [%.3f .. %.3f] over %d "
                "repetitions (target <= %.2f: %s)\n",
                d.c_str(), total.median, gem.median, ratio.median, ratio.min, ratio.max, ratio.samples,
                kOverheadTarget, ratio.median <= kOverheadTarget ? "met" : "NOT met");
  if (run.torch && dispatcher_row(d).one_device())
    std::printf("moe_layer/%-16s PyTorch %s (%s): %.3f ms -> ours %.2fx its speed\n", d.c_str(), run.torch->variant.c_str(),
                run.torch->torch.c_str(), run.torch->ms, run.torch->ms / total.median);
}

}  // namespace moebench
