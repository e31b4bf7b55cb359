#include "models/layout.h"

namespace moebench {

const std::vector<LayoutRow>& layout_table() {
  static const std::vector<LayoutRow> rows = {
      {LayoutKind::dense, "dense", "Dense", ExpertGroup::none, "", "no MoE layer"},
      {LayoutKind::dpmoe, "dpmoe", "DPMoE", ExpertGroup::dp, "the EP (= DP) group", "the experts over the DP group, EP = DP"},
      {LayoutKind::ppmoe, "ppmoe", "PPMoE", ExpertGroup::tp, "the TP group", "the experts inside the TP group (000 Algorithm 1)"},
  };
  return rows;
}

const LayoutRow& layout_row(LayoutKind k) {
  for (const LayoutRow& r : layout_table())
    if (r.kind == k) return r;
  return layout_table().front();
}

const char* layout_kind_name(LayoutKind k) { return layout_row(k).name; }

std::vector<std::string> layout_options() {
  std::vector<std::string> out;
  for (const LayoutRow& r : layout_table()) out.push_back(r.option);
  return out;
}

std::string layout_options_help() {
  std::string out;
  for (const LayoutRow& r : layout_table()) out += (out.empty() ? "" : ", ") + std::string(r.option) + " (" + r.what + ")";
  return out;
}

std::optional<LayoutKind> parse_layout_option(const std::string& option) {
  for (const LayoutRow& r : layout_table())
    if (option == r.option) return r.kind;
  return std::nullopt;
}

std::optional<LayoutKind> parse_layout_name(const std::string& name) {
  for (const LayoutRow& r : layout_table())
    if (name == r.name) return r.kind;
  return std::nullopt;
}

int expert_group_size(LayoutKind kind, int dp, int tp) {
  switch (layout_row(kind).experts_over) {
    case ExpertGroup::dp: return dp;
    case ExpertGroup::tp: return tp;
    case ExpertGroup::none: break;
  }
  return 1;
}

std::string ParallelLayout::describe() const {
  return std::string(layout_kind_name(kind)) + " DP" + std::to_string(dp) + " TP" + std::to_string(tp) + " PP" +
         std::to_string(pp) + (zero ? " ZeRO" : "");
}

std::optional<std::string> ParallelLayout::make(int world, int tp, int pp, int ep, ParallelLayout* out) {
  if (tp < 1) return "--tp: must be >= 1, got " + std::to_string(tp);
  if (pp < 1) return "--pp: must be >= 1, got " + std::to_string(pp);
  if (ep < 1) return "--ep: must be >= 1, got " + std::to_string(ep);
  if (world % (tp * pp) != 0)
    return "--tp x --pp = " + std::to_string(tp * pp) + " must divide the number of ranks (" + std::to_string(world) + ")";
  const int dp = world / (tp * pp);
  if (dp % ep != 0)
    return "--ep: " + std::to_string(ep) + " must divide the data-parallel size " + std::to_string(dp) +
           " (ranks / (tp x pp))";
  out->tp = tp;
  out->pp = pp;
  out->dp = dp;
  out->ep = ep;
  return std::nullopt;
}

}  // namespace moebench
