#include "bench/gpt_step_csv.h"
#include <algorithm>
#include <cstdio>
#include "harness/range_roofline.h"

namespace moebench {

namespace {
// A model's entry, or its default where the run set none (a value of a model that did not run).
template <class Map>
typename Map::mapped_type per_model(const Map& m, bool moe) {
  const auto it = m.find(moe);
  return it == m.end() ? typename Map::mapped_type{} : it->second;
}
}  // namespace

ParallelLayout gpt_step_layout(bool moe) { return ParallelLayout::of(moe ? LayoutKind::ppmoe : LayoutKind::dense, 1, 1, 1); }

bool GptStepRecord::step_captured(bool moe) const { return captured && (!moe || expert_gemm == ExpertGemm::segmented); }

void write_step_csv(const BenchContext& ctx, const GptStepRecord& rec, const std::map<bool, Spread>& ms) {
  std::vector<std::string> cols = {"model", "layers", "hidden", "heads", "ffn", "seq", "vocab", "experts", "sequences",
                                   "tokens_per_step", "ms_per_step", "ms_per_step_min", "ms_per_step_max", "tokens_per_s",
                                   "torch_ms_per_step", "torch_ms_per_step_min", "torch_ms_per_step_max",
                                   "torch_tokens_per_s", "speed_vs_torch", "torch_variant", "torch_attention", "torch",
                                   "torch_device", "torch_math", "attention", "attention_panel_rows", "step_graph",
                                   "graph_nodes", "expert_gemm", "computed_rows_over_routed", "peak_mib",
                                   "torch_peak_mib", "memory_vs_torch", "repetitions", "new_gemm_plans_in_measured_steps",
                                   "gemm_timings_in_measured_steps", "new_pool_blocks_in_measured_steps"};
  for (const auto& c : roofline_columns()) cols.push_back(c);
  CsvTable t(cols);
  for (bool moe : {false, true}) {
    if (!ms.count(moe)) continue;
    const Spread s = ms.at(moe);
    const GptConfig m = layout_model(rec.shape, gpt_step_layout(moe), ctx.dtype());
    const double tokens = double(rec.sequences) * m.seq;
    const std::string name = moe ? "moe" : "dense";
    const auto ref = rec.reference.find(name);
    const bool has_ref = ref != rec.reference.end();
    auto r = [&](double v) { return has_ref ? fmt(v) : std::string("n/a"); };
    std::vector<std::string> row = {name, std::to_string(m.layers), std::to_string(m.hidden), std::to_string(m.heads), std::to_string(m.ffn),
               std::to_string(m.seq), std::to_string(m.vocab), std::to_string(moe ? rec.shape.experts : 0),
               std::to_string(rec.sequences), fmt(tokens), fmt(s.median), fmt(s.min), fmt(s.max),
               fmt(tokens / (s.median / 1e3)), r(has_ref ? ref->second.ms : 0), r(has_ref ? ref->second.ms_min : 0),
               r(has_ref ? ref->second.ms_max : 0), r(has_ref ? tokens / (ref->second.ms / 1e3) : 0),
               has_ref ? fmt(ref->second.ms / s.median, 4) : "n/a (no --reference)",
               has_ref ? ref->second.variant : "n/a", has_ref ? ref->second.cell("attention") : "n/a",
               has_ref ? ref->second.torch : "n/a", has_ref ? ref->second.device : "n/a",
               has_ref ? ref->second.math : "n/a", attention_kernel_name(rec.attention),
               rec.attention == AttentionKernel::blocked ? std::to_string(rec.panel_rows) : "n/a"};
    const bool graph = rec.step_captured(moe);
    row.push_back(graph       ? "captured"
                  : rec.captured ? "eager (the MoE gates read their expert counts on the host; --expert-gemm segmented "
                                "keeps them on the device)"
                              : "eager");
    row.push_back(graph ? std::to_string(per_model(rec.graph_nodes, moe)) : "n/a");
    row.push_back(moe ? expert_gemm_name(rec.expert_gemm) : "n/a");
    // What padding costs the experts (--expert-gemm padded): rows computed over rows routed.
    const double computed = per_model(rec.computed_over_routed, moe);
    row.push_back(!moe ? "n/a (dense)" : computed > 0 ? fmt(computed, 4)
                  : "n/a (no rows counted on the host: --expert-gemm segmented keeps the counts on the device)");
    // Memory beside PyTorch's: ours over its peak (the target is at most 1.1).
    const double peak = per_model(rec.peak_mib, moe);
    row.push_back(fmt(peak));
    // PyTorch reports its allocator's peak on CUDA only.
    if (has_ref && ref->second.cell("peak_mib").rfind("n/a", 0) != 0) {
      const double theirs = std::stod(ref->second.cell("peak_mib"));
      row.push_back(fmt(theirs));
      row.push_back(fmt(peak / theirs, 4));
    } else {
      const std::string why = has_ref ? "n/a (the reference reports no peak: PyTorch keeps one on CUDA only)"
                                      : "n/a (no --reference)";
      row.push_back(why);
      row.push_back(why);
    }
    row.push_back(std::to_string(s.samples));
    // A cuBLASLt plan made, or its algorithms timed, inside a measured step is host time in it
    // (kernels/batched_gemm_cuda.cu): a routing whose GEMM shapes are new every step pays it each step.
    for (std::size_t n : {per_model(rec.plans_in_measured, moe).plans, per_model(rec.plans_in_measured, moe).timed})
      row.push_back(ctx.backend() == Backend::cuda ? std::to_string(n) : "n/a (cpu: its GEMMs make no cuBLASLt plans)");
    // A block the pool took from the system inside a measured step (cudaMalloc on a GPU) is
    // host time in it; routing that grows a buffer past its size class pays it.
    row.push_back(std::to_string(per_model(rec.pool_blocks_in_measured, moe)));
    const Work work = gpt_step_work(moe ? rec.shape : rec.shape.dense(), rec.sequences, int(dtype_size(ctx.dtype())));
    for (auto& cell : roofline_cells(rec.roofline, work, dtype_size(ctx.dtype()) == 2, s.median)) row.push_back(cell);
    t.add_row(row);
    std::printf("gpt.step %-5s %9.2f ms/step  %10.1f tokens/s", name.c_str(), s.median, tokens / (s.median / 1e3));
    if (has_ref)
      std::printf("   PyTorch %s (%s) on %s: %.2f ms/step -> ours %.2fx its speed", ref->second.torch.c_str(),
                  ref->second.variant.c_str(), ref->second.device.c_str(), ref->second.ms, ref->second.ms / s.median);
    if (ctx.backend() == Backend::cuda)
      std::printf("   %zu new cuBLASLt plans, %zu timed, %lld new pool blocks, in the measured steps (after %d warm-up steps)",
                  per_model(rec.plans_in_measured, moe).plans, per_model(rec.plans_in_measured, moe).timed,
                  static_cast<long long>(per_model(rec.pool_blocks_in_measured, moe)), per_model(rec.warmup_steps, moe));
    std::printf("\n");
  }
  t.write(ctx.opts.out_dir + "/gpt/step.csv", ctx.provenance);
}

// gpt/step_breakdown.csv: per model, each range of the eager steps (a tree: phase is its path),
// with its work as models/roofline.h counts it (a phase's FLOPs and least bytes; a parent's the
// sums of its children's) and, with a profile of this device, its floor: a phase's
// max(FLOPs / GEMM rate, bytes / bandwidth) at the profile's rates, a parent's the sum of its
// children's (they run one after another), and its time over that floor.
void write_step_breakdown(const BenchContext& ctx, const GptStepRecord& rec) {
  std::vector<std::string> cols = {"model", "phase", "name", "depth", "calls_per_step", "ms", "ms_min", "ms_max", "share_of_step"};
  cols.insert(cols.end(), kRangeWorkColumns.begin(), kRangeWorkColumns.end());
  for (const char* c : {"steps", "attention", "expert_gemm", "layers", "hidden", "heads", "ffn", "seq", "vocab", "experts", "sequences"})
    cols.push_back(c);
  CsvTable t(cols);
  const int es = int(dtype_size(ctx.dtype()));
  for (const auto& [moe, rows] : rec.phases) {
    const ModelShape shape = moe ? rec.shape : rec.shape.dense();
    std::map<std::string, Work> phase_work;
    for (const auto& [phase, w] : gpt_step_phases(shape, rec.sequences, es)) phase_work[phase] = w;
    const std::map<std::string, CountedRange> counted = count_range_work(rows, phase_work, rec.roofline, es == 2);
    std::vector<const RangeRow*> leaves;
    for (const RangeRow& r : rows) {
      const std::vector<std::string> work = range_work_cells(r, counted, rec.roofline);
      std::vector<std::string> row = {moe ? "moe" : "dense", r.path, r.name, std::to_string(r.depth), std::to_string(r.calls),
                                      fmt(r.ms.median), fmt(r.ms.min), fmt(r.ms.max), fmt(r.share, 4)};
      row.insert(row.end(), work.begin(), work.end());
      for (const std::string& cell :
           {std::to_string(r.ms.samples), std::string(attention_kernel_name(rec.attention)),
            std::string(moe ? expert_gemm_name(rec.expert_gemm) : "n/a"), std::to_string(shape.layers),
            std::to_string(shape.hidden), std::to_string(shape.heads), std::to_string(shape.ffn), std::to_string(shape.seq),
            std::to_string(shape.vocab), std::to_string(moe ? shape.experts : 0), std::to_string(rec.sequences)})
        row.push_back(cell);
      t.add_row(row);
      if (r.leaf) leaves.push_back(&r);
    }
    std::sort(leaves.begin(), leaves.end(), [](const RangeRow* a, const RangeRow* b) { return a->ms.median > b->ms.median; });
    std::printf("gpt.step %-5s eager step by phase:", moe ? "moe" : "dense");
    for (std::size_t i = 0; i < std::min<std::size_t>(4, leaves.size()); ++i) {
      const RangeRow& r = *leaves[i];
      std::printf("  %s %.1f%%", r.path.substr(r.path.find('/') + 1).c_str(), 100 * r.share);
      if (const auto c = counted.find(r.path); c != counted.end() && c->second.floor_ms > 0)
        std::printf(" (%.2gx its floor)", r.ms.median / c->second.floor_ms);
    }
    std::printf("\n");
  }
  t.write(ctx.opts.out_dir + "/gpt/step_breakdown.csv", ctx.provenance);
}

// gpt/step_kernels.csv (--kernels): per model the ops of as many eager steps by phase
// (the innermost timed range they were launched in) and kernel, the slowest first; or, where
// the log could not run, one row per model saying why.
void write_step_kernels(const BenchContext& ctx, const GptStepRecord& rec, const std::map<bool, Spread>& measured) {
  if (!rec.log_kernels) return;
  CsvTable t(kernel_table_columns({"model"}, "step", {"attention", "expert_gemm", "layers", "hidden", "heads", "ffn", "seq",
                                                     "vocab", "experts", "sequences"}));
  for (const bool moe : {false, true}) {
    if (!rec.phases.count(moe)) continue;
    const ModelShape shape = moe ? rec.shape : rec.shape.dense();
    const std::vector<std::string> tail = {
        attention_kernel_name(rec.attention), moe ? expert_gemm_name(rec.expert_gemm) : "n/a", std::to_string(shape.layers),
        std::to_string(shape.hidden), std::to_string(shape.heads), std::to_string(shape.ffn), std::to_string(shape.seq),
        std::to_string(shape.vocab), std::to_string(moe ? shape.experts : 0), std::to_string(rec.sequences)};
    const auto found = rec.kernels.find(moe);
    const KernelLogRuns log = found != rec.kernels.end() ? found->second : KernelLogRuns{{}, rec.kernel_log_failure, {}};
    add_kernel_rows(t, log, {moe ? "moe" : "dense"}, tail);
    std::printf("gpt.step %-5s %s\n", moe ? "moe" : "dense", slowest_kernels(log).c_str());
    const auto step = measured.find(moe);
    if (rec.step_captured(moe))
      std::printf("gpt.step %-5s the measured steps were replayed from a graph, the logged ones eager: their spans "
                  "are not set side by side\n", moe ? "moe" : "dense");
    else if (step != measured.end())
      std::printf("gpt.step %-5s %s\n", moe ? "moe" : "dense", logged_against_measured(log, step->second.median).c_str());
  }
  t.write(ctx.opts.out_dir + "/gpt/step_kernels.csv", ctx.provenance);
}

}  // namespace moebench
