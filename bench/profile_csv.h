// What moebench_profile measures and writes: the sizes of its measurements, and
// models/profile_<name>.csv from their times, in the profile format (models/hardware_profile.h),
// each measured value with its range over the repetitions.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "harness/bench.h"
#include "comm/collective_table.h"
#include "kernels/gemm.h"
#include "models/hardware_profile.h"

namespace moebench {

struct Shape {
  int m, n, k;
  double flops() const { return gemm_flops(m, n, k); }
  std::string key() const { return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k); }
};

inline constexpr int kCopies = 4, kExchangeRounds = 20;  // copies, and all-to-alls, per timed iteration

// GEMMs per timed iteration: about 1.5 GFLOP, tens of ms on a core -- longer than the OS's
// time slice, so ranks sharing cores share them during the measurement as during a run.
inline int repeats(const Shape& s) { return std::max(1, int(1.5e9 / s.flops())); }

// The small all-to-all: 8 bytes per peer.
inline std::size_t small_message(const BenchContext& ctx) { return std::size_t(8) * ctx.world.size(); }

std::string curve_key(collectives::Collective c, std::uint64_t size_bytes);

struct ProfileRecord {
  std::string name = "this_machine";
  std::optional<HardwareProfile> link;      // --link-profile's, on one rank
  std::vector<Shape> shapes;                // the GEMM sweep
  std::vector<std::uint64_t> curve_sizes;   // the collectives' measured sizes, 4x apart
  std::size_t copy_bytes = 1 << 20, big_message = 1 << 18;
};

// Writes the profile from the runs' times; 1 (and says so) when a measurement failed.
int write_profile_csv(const BenchContext& ctx, const ProfileRecord& rec, const std::vector<RunRecord>& runs);

}  // namespace moebench
