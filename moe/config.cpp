#include "moe/config.h"
#include "kernels/segment_gemm.h"
#include "models/expert_split.h"

namespace moebench {

std::vector<std::string> gate_impl_names() { return {gate_impl_name(GateImpl::fused), gate_impl_name(GateImpl::paper)}; }

std::optional<GateImpl> parse_gate_impl(const std::string& name) {
  for (GateImpl g : {GateImpl::fused, GateImpl::paper})
    if (name == gate_impl_name(g)) return g;
  return std::nullopt;
}

ExpertGemm default_expert_gemm(Backend backend, int ffn) {
  return backend == Backend::cuda && ffn % 8 == 0 ? ExpertGemm::padded : ExpertGemm::grouped;
}

std::optional<std::string> MoEConfig::validate(int tokens, int expert_ranks) const {
  auto s = [](auto v) { return std::to_string(v); };
  if (hidden < 1) return "--hidden: must be >= 1, got " + s(hidden);
  if (ffn < 1) return "--ffn: must be >= 1, got " + s(ffn);
  if (tokens < 1) return "--tokens: must be >= 1, got " + s(tokens);
  if (experts < 1) return "--experts: must be >= 1, got " + s(experts);
  if (prototypes < 1) return "--prototypes: must be >= 1, got " + s(prototypes);
  if (experts % prototypes != 0)
    return "--prototypes: " + s(prototypes) + " does not divide --experts " + s(experts) +
           " (each prototype holds experts/prototypes experts)";
  if (top_k < 1) return "--top-k: must be >= 1, got " + s(top_k);
  if (top_k > per_prototype())
    return "--top-k: " + s(top_k) + " exceeds the " + s(per_prototype()) + " experts per prototype (--experts / --prototypes)";
  if (capacity_factor && !(*capacity_factor > 0.0))
    return "--capacity-factor: must be > 0, got " + std::to_string(*capacity_factor) + " (omit it for dropless routing)";
  if (auto e = expert_split_error(experts, expert_ranks, "")) return e;
  if (!(aux_coef >= 0)) return "--aux-coef: must be a number >= 0";
  if (gate == GateImpl::paper && !capacity_factor)
    return "--gate paper: M6-T's one-hot dispatch needs an expert capacity; give --capacity-factor";
  if (gate == GateImpl::paper && dtype != DType::f32)
    return "--gate paper: its dense dispatch and combine tensors are fp32; allowed --dtype fp32";
  if (gate == GateImpl::paper && gate_kernels)
    return "--gate-kernels: the paper gate routes by rounds of arg-max, not by the fused gate's kernels; use --gate "
           "fused or drop --gate-kernels";
  if (gate == GateImpl::paper && expert_gemm == ExpertGemm::segmented)
    return "--expert-gemm segmented: the paper gate's one-hot dispatch is built from counts on the host; use --gate fused";
  return std::nullopt;
}

std::optional<std::string> MoEConfig::validate_for(Backend backend) const {
  if (gate_kernels && backend != Backend::cuda)
    return "--gate-kernels: a choice between the gate's CUDA kernels; the " + std::string(backend_name(backend)) +
           " backend routes in one op of its own; drop --gate-kernels or use --backend cuda";
  if (gate_kernels == RouteKernels::one_pass &&
      route_tokens_kernels_cuda(GateShape{0, experts, prototypes, top_k}) != RouteKernels::one_pass)
    return "--gate-kernels one_pass: it needs a device that launches cooperative kernels and at most " +
           std::to_string(kRouteOnePassMaxExperts) + " experts a prototype (--experts / --prototypes: " +
           std::to_string(per_prototype()) + "); use --gate-kernels separate";
  if (expert_gemm == ExpertGemm::segmented)
    if (const std::string why = segment_gemm_unsupported(backend, dtype, {hidden, ffn}); !why.empty())
      return "--expert-gemm segmented: " + why + " (--hidden " + std::to_string(hidden) + ", --ffn " + std::to_string(ffn) +
             ", --dtype " + std::string(dtype_name(dtype)) + "); use another --expert-gemm";
  if (backend == Backend::cuda && expert_gemm == ExpertGemm::padded && ffn % 8 != 0)
    return "--ffn: " + std::to_string(ffn) + " is not a multiple of 8, which --expert-gemm padded needs on the GPU "
           "(cuBLASLt's GeLU epilogue stores its input with a leading dimension in multiples of 8); use a multiple of 8 "
           "or --expert-gemm grouped";
  if (backend != Backend::cuda || dtype == DType::f32 || expert_gemm != ExpertGemm::grouped) return std::nullopt;
  for (const auto& [option, v] : {std::pair{"--hidden", hidden}, std::pair{"--ffn", ffn}})
    if (v % 8 != 0)
      return std::string(option) + ": " + std::to_string(v) + " is not a multiple of 8, which --expert-gemm grouped needs in " +
             std::string(dtype_name(dtype)) + " on the GPU (16-byte aligned rows); use a multiple of 8 or --expert-gemm serial";
  return std::nullopt;
}

std::string MoEConfig::gate_kernels_name(Backend backend) const {
  if (gate == GateImpl::paper) return "arg_max_rounds";
  if (backend != Backend::cuda) return "cpu_op";
  return route_kernels_name(gate_kernels.value_or(route_tokens_kernels_cuda(GateShape{0, experts, prototypes, top_k})));
}

}  // namespace moebench
