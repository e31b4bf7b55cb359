#include "bench/moe_options.h"

namespace moebench {

void MoEOptions::add(CLI::App& app) {
  app.add_option("--hidden", hidden, "Hidden size h (default: by scale)");
  app.add_option("--ffn", ffn, "Expert FFN size f (default: by scale, 4h)");
  app.add_option("--experts", experts, "Experts in the layer E (default: by scale)");
  app.add_option("--prototypes", prototypes, "Expert prototypes Z (M6-T); E/Z experts each (default 1)");
  app.add_option("--top-k", top_k, "Experts per token inside each prototype (default: by scale)");
  app.add_option("--tokens", tokens, "Tokens per rank (default: by scale)");
  app.add_option("--capacity-factor", capacity_factor, "Capacity factor gamma of M6-T Eq. 2 (> 0); default dropless")
      ->each([this](const std::string&) { capacity_given = true; });
  app.add_flag("--no-aux", no_aux, "Switch the load-balancing loss off");
  app.add_option("--aux-coef", aux_coef, "Load-balancing loss coefficient")->capture_default_str();
  app.add_option("--expert-gemm", expert_gemm, "Local experts as one grouped GEMM or serial GEMMs")
      ->check(CLI::IsMember({"grouped", "serial"}))
      ->capture_default_str();
  app.add_option("--seed", seed, "Seed of weights and tokens")->capture_default_str();
}

std::optional<std::string> MoEOptions::resolve(const MoEConfig& d, int default_tokens, DType dtype, int expert_ranks) {
  config = d;
  if (hidden >= 0) config.hidden = hidden;
  config.ffn = ffn >= 0 ? ffn : (hidden >= 0 ? 4 * hidden : d.ffn);
  if (experts >= 0) config.experts = experts;
  if (prototypes >= 0) config.prototypes = prototypes;
  if (top_k >= 0) config.top_k = top_k;
  if (capacity_given) config.capacity_factor = capacity_factor;
  config.aux_loss = !no_aux;
  config.aux_coef = aux_coef;
  config.expert_gemm = expert_gemm == "serial" ? ExpertGemm::serial : ExpertGemm::grouped;
  config.dtype = dtype;
  if (tokens < 0) tokens = default_tokens;
  return config.validate(tokens, expert_ranks);
}

}  // namespace moebench
