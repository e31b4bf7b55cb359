// Google Benchmark glue shared by every bench binary: MPI bootstrap, common options, device,
// allocator and world communicator; manual time = the slowest rank's time per iteration;
// rank 0 alone reports (other ranks get no reporter and no --benchmark_out file); the runs
// are handed back to the program, which writes its paper-shaped CSV.
#pragma once
#include <benchmark/benchmark.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "harness/allocator.h"
#include "harness/comm.h"
#include "harness/csv.h"
#include "harness/device.h"
#include "harness/options.h"
#include "harness/runtime.h"

namespace moebench {

struct BenchContext {
  Runtime& rt;
  CommonOptions& opts;
  Device& device;
  TrackingAllocator& alloc;
  Communicator& world;
  Provenance provenance;

  Backend backend() const { return opts.backend_kind(); }
  DType dtype() const { return opts.dtype_kind(); }
  Scale scale() const { return opts.scale_kind(); }
  // An error naming `option` if `bytes` more would not fit in the device's free memory.
  std::optional<std::string> check_fits(std::uint64_t bytes, const std::string& option) const;
  // Sets the iteration's manual time to the slowest rank's `local_ms`.
  void set_iteration_time(benchmark::State& st, double local_ms) const;
  // Collective: skips the benchmark on every rank if `reason` is set on any of them.
  bool skip_if_any(benchmark::State& st, const std::optional<std::string>& reason) const;
  void profile_begin() const;
  void profile_end() const;
};

struct RunRecord {
  std::string name;
  std::int64_t iterations = 0;
  double seconds_per_iter = 0;  // manual (slowest-rank) time
  std::map<std::string, double> counters;
  bool error = false;
  std::string error_message;
};

class BenchProgram {
 public:
  virtual ~BenchProgram() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual void add_options(CLI::App&) {}
  // Deterministic checks of the options against the world and device; run on every rank.
  virtual std::optional<std::string> validate(const BenchContext&) { return std::nullopt; }
  virtual void register_benchmarks(BenchContext& ctx) = 0;
  // Called on every rank after the runs (`runs` is filled on rank 0); returns the exit code.
  virtual int finish(BenchContext&, const std::vector<RunRecord>&) { return 0; }
};

int bench_main(int argc, char** argv, BenchProgram& program);

}  // namespace moebench
