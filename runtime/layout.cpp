#include "runtime/layout.h"

namespace moebench {

const char* layout_kind_name(LayoutKind k) {
  return k == LayoutKind::dense ? "Dense" : k == LayoutKind::dpmoe ? "DPMoE" : "PPMoE";
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
