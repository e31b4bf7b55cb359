// Command-line options that describe an MoE layer (shared by the MoE benches), with
// per-scale defaults: a value given on the command line always wins, and "not given" is
// nullopt, never a value a user could type.
#pragma once
#include <optional>
#include <string>
#include "harness/options.h"
#include "moe/config.h"

namespace moebench {

struct MoEOptions {
  std::optional<int> hidden, ffn, experts, prototypes, top_k, tokens;
  std::optional<double> capacity_factor, aux_coef;  // capacity nullopt: dropless
  bool no_aux = false;
  std::string expert_gemm;  // empty: default_expert_gemm(); the route resolve() took once it has run
  std::string gate = "fused";
  std::string gate_kernels;          // empty: the one pass where it can run
  std::string gate_kernels_ran;      // what resolve() found the gate will run (the rows' gate_kernels)
  std::optional<std::int64_t> seed;

  void add(CLI::App& app);
  // Fills unset fields from `defaults`, then validates (tokens per rank, ranks the experts split
  // over, and what the backend can compute).
  std::optional<std::string> resolve(const MoEConfig& defaults, int default_tokens, DType dtype, Backend backend,
                                     int expert_ranks);
  MoEConfig config;
  int resolved_tokens = 0;
  std::uint64_t resolved_seed = 1234;
};

}  // namespace moebench
