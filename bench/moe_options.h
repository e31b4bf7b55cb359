// Command-line options that describe an MoE layer (shared by the MoE benches), with
// per-scale defaults: a value given on the command line always wins.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include "harness/options.h"
#include "moe/config.h"

namespace moebench {

struct MoEOptions {
  int hidden = -1, ffn = -1, experts = -1, prototypes = -1, top_k = -1, tokens = -1;  // -1: the scale's default
  double capacity_factor = -1;  // < 0 on the command line means "not given"
  bool capacity_given = false, dropless = false, no_aux = false;
  float aux_coef = 0.01f;
  std::string expert_gemm = "grouped";
  std::uint64_t seed = 1234;

  void add(CLI::App& app);
  // Fills unset fields from `defaults`, then validates (tokens per rank, ranks the experts split over).
  std::optional<std::string> resolve(const MoEConfig& defaults, int default_tokens, DType dtype, int expert_ranks);
  MoEConfig config;
};

}  // namespace moebench
