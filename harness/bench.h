// Google Benchmark glue shared by every bench binary: MPI bootstrap, common options, device,
// allocator and world communicator; manual time = the slowest rank's time per iteration;
// every measurement repeated (--repetitions) and reported as median and spread; rank 0 alone
// reports (other ranks get no --benchmark_out file); the runs are handed back to the program,
// which writes its paper-shaped CSV. The program object is made and destroyed inside
// bench_main, so everything it holds is released while the device, allocator and
// communicators it came from still exist.
#pragma once
#include <benchmark/benchmark.h>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include "runtime/allocator.h"
#include "comm/comm.h"
#include "harness/csv.h"
#include "runtime/device.h"
#include "runtime/timing.h"
#include "harness/options.h"
#include "harness/progress.h"
#include "runtime/runtime.h"
#include "harness/spread.h"

namespace moebench {

struct BenchContext {
  Runtime& rt;
  CommonOptions& opts;
  Device& device;
  TrackingAllocator& alloc;
  Communicator& world;
  Provenance provenance;
  std::vector<std::string> registered;  // names, in registration order
  // Google Benchmark's full names of those (what --benchmark_filter is matched against).
  std::vector<std::string> run_names;
  std::shared_ptr<RunProgress> progress;
  // The program's repetitions at this scale when --repetitions is not given
  // (BenchProgram::repetitions_at).
  int default_repetitions = 5;
  // The largest need check_fits() was asked about (printed before the first case).
  mutable std::uint64_t largest_need = 0;
  // What add() took, in order, until register_rounds().
  struct Case {
    std::string name;
    int iterations, repetitions;
    std::function<void(benchmark::State&)> fn;
    benchmark::TimeUnit unit;
  };
  std::vector<Case> cases;

  Backend backend() const { return opts.backend_kind(); }
  // What library code that measures takes (runtime/timing.h).
  MeasureEnv env() const { return MeasureEnv{rt, device, world}; }
  DType dtype() const { return opts.dtype_kind(); }
  Scale scale() const { return opts.scale_kind(); }
  // --repetitions, or the program's default at this scale.
  int repetitions() const;
  // Registers `name`: manual time, `iterations` per repetition, repetitions() repetitions
  // (or `repetitions` when given: a run whose output is not a timing needs one). The repetitions
  // of every case run interleaved, round by round (repetition r of each case before repetition
  // r + 1 of any), so that cases compared with each other share the machine's slow and fast
  // minutes, and repetition r of one pairs with repetition r of another (RunRecord::seconds).
  void add(const std::string& name, int iterations, std::function<void(benchmark::State&)> fn,
           benchmark::TimeUnit unit = benchmark::kMillisecond, std::optional<int> repetitions = std::nullopt);
  // Hands what add() took to Google Benchmark, round by round (bench_main calls it).
  void register_rounds();
  // An error naming `option` if `bytes` more would not fit in the device's free memory.
  std::optional<std::string> check_fits(std::uint64_t bytes, const std::string& option) const;
  // Sets the iteration's manual time to the slowest rank's `local_ms`.
  void set_iteration_time(benchmark::State& st, double local_ms) const;
  // The one timing loop step every bench uses: `work` between two events on `s` (work on other
  // streams joins `s` before its end), the device synchronized, the slowest rank's milliseconds.
  template <class F>
  double time_ms(const Stream& s, F&& work) const {
    return slowest_rank_ms(rt, device, s, std::forward<F>(work));
  }
  // ... and that time as the iteration's manual time; returns it.
  template <class F>
  double time_iteration(benchmark::State& st, const Stream& s, F&& work) const {
    const double ms = time_ms(s, std::forward<F>(work));
    st.SetIterationTime(ms / 1e3);
    return ms;
  }
  // Collective: skips the benchmark on every rank if `reason` is set on any of them.
  bool skip_if_any(benchmark::State& st, const std::optional<std::string>& reason) const;
  void profile_begin() const;
  void profile_end() const;
};

// One registered benchmark after all its repetitions.
struct RunRecord {
  std::string name;                // as registered
  std::int64_t iterations = 0;     // per repetition
  // Manual (slowest-rank) seconds per iteration, one per repetition, in the order they ran: the
  // r-th of every case ran in the same round (BenchContext::add), so they pair.
  std::vector<double> seconds;
  std::map<std::string, std::vector<double>> counters;  // one value per repetition
  bool error = false;
  std::string error_message;

  Spread time_ms() const;
  std::vector<double> ms() const;  // seconds, in milliseconds, in the order they ran
  Spread counter(const std::string& name) const;  // throws Error if absent
  int repetitions() const { return int(seconds.size()); }
};

// Where a program writes; checked before anything is measured.
struct OutputFolder {
  std::string option;  // e.g. "--out", "--dump"
  std::string path;
  bool every_rank = false;  // written by every rank (else by rank 0)
};

class BenchProgram {
 public:
  virtual ~BenchProgram() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual void add_options(CLI::App&) {}
  // Deterministic checks of the options against the world and device; run on every rank.
  virtual std::optional<std::string> validate(const BenchContext&) { return std::nullopt; }
  // Whether its measurements take --warmup and --iters. A bench whose iteration is a whole run
  // it sets up itself (a training step, a pipeline schedule) refuses them rather than ignore them.
  virtual bool takes_iteration_counts() const { return false; }
  // How many times each measurement repeats when --repetitions is not given: 3 at the tiny
  // scale, 5 otherwise. A bench whose repetitions are cheap takes more, so that the confidence
  // interval of a median drops the extreme repetitions (5 give min..max; 15, the 4th to 12th).
  virtual int repetitions_at(Scale s) const { return s == Scale::tiny ? 3 : 5; }
  // The folders it will write (default: none).
  virtual std::vector<OutputFolder> output_folders(const BenchContext&) const { return {}; }
  virtual void register_benchmarks(BenchContext& ctx) = 0;
  // Called on every rank after the runs (`runs` is filled on rank 0); returns the exit code.
  virtual int finish(BenchContext&, const std::vector<RunRecord>&) { return 0; }
};

int bench_main(int argc, char** argv, const std::function<std::unique_ptr<BenchProgram>()>& make_program);

template <class Program>
int bench_main(int argc, char** argv) {
  return bench_main(argc, argv, [] { return std::make_unique<Program>(); });
}

// A line for the console and the CSV: "12.3 ms (median of 5; 11.9-13.0)".
std::string describe_ms(const Spread& s);

}  // namespace moebench
