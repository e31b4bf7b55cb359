#include "bench/moe_options.h"

namespace moebench {

void MoEOptions::add(CLI::App& app) {
  constexpr int kMax = 1 << 30;
  add_whole(app, "--hidden", hidden, 1, kMax, "Hidden size h (default: by scale)");
  add_whole(app, "--ffn", ffn, 1, kMax, "Expert FFN size f (default: by scale, 4h when --hidden is given)");
  add_whole(app, "--experts", experts, 1, kMax, "Experts in the layer E (default: by scale)");
  add_whole(app, "--prototypes", prototypes, 1, kMax, "Expert prototypes Z (M6-T); E/Z experts each (default 1)");
  add_whole(app, "--top-k", top_k, 1, kMax, "Experts per token inside each prototype (default: by scale)");
  add_whole(app, "--tokens", tokens, 1, kMax, "Tokens per rank (default: by scale)");
  add_real(app, "--capacity-factor", capacity_factor, above(0), "Capacity factor gamma of M6-T Eq. 2; default dropless");
  add_flag(app, "--no-aux", no_aux, "Switch the load-balancing loss off");
  add_real(app, "--aux-coef", aux_coef, at_least(0), "Load-balancing loss coefficient (default 0.01)");
  add_choice(app, "--expert-gemm", expert_gemm, expert_gemm_names(),
             "Local experts as one grouped GEMM, serial GEMMs, one strided-batched GEMM over rows padded to the "
             "busiest expert's with GeLU in its epilogue, one GEMM per expert over 4 side streams, or one segment GEMM "
             "per step whose row counts stay on the device (our kernel; local and ppmoe dispatchers) (default: padded on "
             "cuda where f is a multiple of 8, else grouped)");
  add_choice(app, "--gate", gate, gate_impl_names(),
             "Gate: ours (fused softmax + top-k, index dispatch) or M6-T's (k rounds of arg-max, one-hot "
             "dispatch and combine tensors; needs --capacity-factor) (default fused)");
  add_choice(app, "--gate-kernels", gate_kernels, {"one_pass", "separate"},
             "The fused gate's routing on cuda: one cooperative kernel, or softmax + top-k, the capacity kernels and the "
             "aux statistics apart (default: one_pass where the device and shape allow it)");
  add_whole(app, "--seed", seed, std::int64_t(0), std::int64_t(1) << 62, "Seed of weights and tokens (default 1234)");
}

std::optional<std::string> MoEOptions::resolve(const MoEConfig& d, int default_tokens, DType dtype, Backend backend,
                                               int expert_ranks) {
  if (no_aux && aux_coef)
    return "--aux-coef: given with --no-aux, which switches the aux loss off; drop one of the two";
  config = d;
  if (hidden) config.hidden = *hidden;
  config.ffn = ffn ? *ffn : (hidden ? 4 * *hidden : d.ffn);
  if (experts) config.experts = *experts;
  if (prototypes) config.prototypes = *prototypes;
  if (top_k) config.top_k = *top_k;
  if (capacity_factor) config.capacity_factor = *capacity_factor;
  config.aux_loss = !no_aux;
  if (aux_coef) config.aux_coef = float(*aux_coef);
  config.expert_gemm = expert_gemm.empty() ? default_expert_gemm(backend, config.ffn) : *parse_expert_gemm(expert_gemm);
  expert_gemm = expert_gemm_name(config.expert_gemm);  // what the rows record
  config.gate = *parse_gate_impl(gate);
  config.gate_kernels = gate_kernels.empty() ? std::nullopt : parse_route_kernels(gate_kernels);
  config.dtype = dtype;
  resolved_tokens = tokens.value_or(default_tokens);
  resolved_seed = std::uint64_t(seed.value_or(1234));
  if (auto e = config.validate(resolved_tokens, expert_ranks)) return e;
  if (auto e = config.validate_for(backend)) return e;
  gate_kernels_ran = config.gate_kernels_name(backend);
  return std::nullopt;
}

}  // namespace moebench
