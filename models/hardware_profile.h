// A hardware profile: what the performance models know about a machine, read from a CSV data
// file (models/profiles/<name>.csv, or one the suite's own micro-benchmarks wrote), each value
// with where it comes from (a paper, a vendor datasheet, a measurement of this suite).
// Columns: field,at,value,unit,source. Every scalar field below is required once and > 0;
// gemm_efficiency rows (at least one) give the attained fraction of peak at a GEMM of `at` FLOPs,
// a measured curve that the model interpolates in log(FLOPs), holds flat past its largest size
// and, below its smallest, keeps that GEMM's time (launch-bound). Optional, for a profile the
// suite measured: <collective>_time rows (all_reduce, all_gather, reduce_scatter, all_to_all,
// send_recv), the collective's time in us at a size of `at` bytes (the comm bench's size) among
// gpus_per_node ranks on one node, at least two sizes each; the collective model uses them in
// place of its alpha-beta formula inside one node. Optional: overlap_slowdown rows (unit
// fraction, `at` = "y|x"), MPMoE's alpha(y, x) (003 Sec. 2.3): the speed of y in {comm, comp,
// mem} while x in {comm, comp, mem, all} runs beside it; 1 (perfect overlap) where not given.
// Extra columns (a measured profile's low/high
// spread and provenance) are ignored.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

struct HardwareProfile {
  std::string name, path;
  int gpus_per_node = 0;           // devices (ranks) per node
  double peak_fp16_flops = 0;      // FLOP/s, dense 16-bit (tensor cores)
  double peak_fp32_flops = 0;      // FLOP/s
  double memory_bytes = 0;         // per device
  double memory_bw = 0;            // bytes/s, device memory
  double elementwise_bw = 0;       // bytes/s the suite's elementwise kernels move (memory-bound on a GPU)
  double intra_bw = 0;             // bytes/s per device inside a node (a ring's bus bandwidth)
  double intra_latency = 0;        // s per message step inside a node
  double inter_bw = 0;             // bytes/s per node between nodes (shared by the node's devices)
  double inter_latency = 0;        // s per message step between nodes
  double pcie_bw = 0;              // bytes/s device <-> host
  std::vector<std::pair<double, double>> gemm_efficiency;  // (GEMM FLOPs, fraction of peak), ascending
  // Measured collective times among gpus_per_node ranks on one node, by collective name:
  // (bytes, seconds), ascending, two sizes or more; empty where the profile has none.
  std::map<std::string, std::vector<std::pair<double, double>>> collective_seconds;
  // A link the CPU runtime emulates over MPI (comm/comm.h, EmulatedLink), set by whoever
  // models a run on one (never read from a file): each operation inside the node ends at the
  // later of MPI's own time and latency + bus bytes / bandwidth.
  struct EmulatedLink {
    double latency = 0;    // s
    double bandwidth = 0;  // bytes/s
  };
  std::optional<EmulatedLink> emulated_link;
  // alpha(y, x) by (y, x); empty where the profile gives none (the models then take 1).
  std::map<std::pair<std::string, std::string>, double> overlap_slowdown;
  std::map<std::string, std::string> sources;              // field -> where its value comes from

  double peak_flops(bool half) const { return half ? peak_fp16_flops : peak_fp32_flops; }
  double gemm_efficiency_at(double flops) const;
  // Seconds of a GEMM of `flops` at its size's efficiency.
  double gemm_seconds(double flops, bool half) const;
};

// The profile's scalar fields: name, unit in the file, factor to SI, member.
struct ProfileScalar {
  const char* field;
  const char* unit;
  double scale;
  double HardwareProfile::* member;
};
const std::vector<ProfileScalar>& profile_scalars();

// Reads and checks a profile file; throws Error naming the file and the field at fault
// ("profile F: field 'inter_bw_GBps' is missing", "... must be > 0, got -3").
HardwareProfile load_hardware_profile(const std::string& path);
// A profile name (models/profiles/<name>.csv under the source tree) or a path to a CSV file.
std::string resolve_profile(const std::string& name_or_path);
// resolve_profile + load_hardware_profile; a name that is no shipped profile is an error naming
// `option` and the names there are.
HardwareProfile load_profile_option(const std::string& option, const std::string& name_or_path);
// The collectives a profile may give measured times of (the comm bench's names).
const std::vector<std::string>& profiled_collectives();
// The profile files shipped with the suite, by name.
std::vector<std::string> shipped_profiles();

}  // namespace moebench
