// Expert capacity and positions (M6-T Eq. 2, GShard-style groups). Tokens form G equal,
// contiguous groups (one per source rank in expert parallelism); inside a group each expert
// takes assignments in priority order -- first choices of all tokens, then second choices,
// ... (j-th best within the prototype, then token order) -- and keeps the first `capacity`;
// the rest are dropped (their tokens pass through the residual). capacity < 0: dropless.
#pragma once
#include <cstddef>
#include <cstdint>
#include "kernels/exec.h"
#include "kernels/gating.h"

namespace moebench {

struct CapacityShape {
  GateShape gate;
  int groups = 1;
  int capacity = -1;  // per expert per group; < 0 keeps every assignment
};

// C = ceil(k * T / N * gamma) with k = total slots per token, T tokens per group, N experts.
int expert_capacity(int slots, int tokens_per_group, int experts, double capacity_factor);

// expert [T, S] -> position [T, S] (-1 if dropped), routed [G, E] and kept [G, E] counts.
void assign_positions_cpu(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                          std::int32_t* routed, std::int32_t* kept);
// The GPU version is a parallel counting sort that keeps the CPU order exactly: for each
// (group, prototype) the assignments, in priority order (choice j, then token), are cut into
// tiles of capacity_tile(); (1) a histogram per tile and expert, (2) an exclusive scan over the
// tiles per expert (one warp each) gives each tile's first position (and the routed / kept
// totals), (3) one warp per tile ranks its assignments among equal experts in order
// (__match_any_sync). Work O(T k + tiles E) instead of one thread per expert reading all T k slots.
// Tiles of `assignments` (one group's T k for one prototype): about 128 of them, so that a layer's
// few thousand tokens still spread over a GPU's hundred-odd SMs (8192 tokens: 128 tiles of 64,
// not 8 of 1024), in multiples of the warp, from 64 to 1024 assignments each.
inline constexpr int kCapacityTargetTiles = 128, kCapacityMinTile = 64, kCapacityMaxTile = 1024;
inline int capacity_tile(long assignments) {
  const long per_tile = (assignments + kCapacityTargetTiles - 1) / kCapacityTargetTiles;
  const long rounded = (per_tile + 31) / 32 * 32;
  return int(rounded < kCapacityMinTile ? kCapacityMinTile : rounded > kCapacityMaxTile ? kCapacityMaxTile : rounded);
}
// Device bytes of workspace assign_positions needs (0 on the CPU).
std::size_t assign_positions_workspace_bytes(const Exec& ex, const CapacityShape& c);
void assign_positions_cuda(const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                           std::int32_t* routed, std::int32_t* kept, void* workspace, std::size_t workspace_bytes,
                           void* stream);
void assign_positions(const Exec& ex, const CapacityShape& c, const std::int32_t* expert, std::int32_t* position,
                      std::int32_t* routed, std::int32_t* kept, void* workspace = nullptr, std::size_t workspace_bytes = 0);

}  // namespace moebench
