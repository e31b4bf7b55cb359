// Command-line options every moebench binary shares (CLI11), and typed option helpers that
// keep "not given" apart from every value a user can type (std::nullopt vs a value), reject
// non-finite numbers, and say in words what is allowed:
//   "--tokens: '-5' is out of range; allowed: a whole number >= 1".
#pragma once
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>
#include "kernels/dtype.h"
#include "kernels/exec.h"
#include "runtime/watchdog.h"

// CLI11 is included only where an App is built or parsed (options.cpp, bench.cpp,
// tool_command_line.cpp): parsing its header dominates the compile time of a file that includes
// it, so the benches and tools add their options through the helpers below.
namespace CLI {
class App;
class Option;
class ParseError;
}  // namespace CLI

namespace moebench {

enum class Scale { tiny, local, paper };
const char* scale_name(Scale s);

// A bound of a real-valued option: inclusive (>=) or exclusive (>).
struct RealBound {
  double value;
  bool inclusive;
};
inline constexpr RealBound at_least(double v) { return {v, true}; }
inline constexpr RealBound above(double v) { return {v, false}; }

// Whole numbers in [min, max] (both inclusive).
CLI::Option* add_whole(CLI::App& app, const std::string& name, std::optional<std::int64_t>& out, std::int64_t min,
                       std::int64_t max, const std::string& help);
CLI::Option* add_whole(CLI::App& app, const std::string& name, std::optional<int>& out, int min, int max,
                       const std::string& help);
// Finite reals above `lo` (and at most `hi` when given).
CLI::Option* add_real(CLI::App& app, const std::string& name, std::optional<double>& out, RealBound lo,
                      const std::string& help, std::optional<double> hi = std::nullopt);
// A comma-separated list of finite reals, each above `lo`.
CLI::Option* add_reals(CLI::App& app, const std::string& name, std::vector<double>& out, RealBound lo,
                       const std::string& help);
// A comma-separated list of whole numbers, each in [min, max].
CLI::Option* add_wholes(CLI::App& app, const std::string& name, std::vector<int>& out, int min, int max,
                        const std::string& help);
// One of `allowed`.
CLI::Option* add_choice(CLI::App& app, const std::string& name, std::string& out, const std::vector<std::string>& allowed,
                        const std::string& help);
// A comma-separated list, each one of `allowed`, no repeats.
CLI::Option* add_choices(CLI::App& app, const std::string& name, std::vector<std::string>& out,
                         const std::vector<std::string>& allowed, const std::string& help);
// A file or folder path; empty is an error.
CLI::Option* add_path(CLI::App& app, const std::string& name, std::string& out, const std::string& help);
// Free text the caller checks itself (a size, a name), shown as `type` in --help.
CLI::Option* add_text(CLI::App& app, const std::string& name, std::string& out, const std::string& type,
                      const std::string& help);
CLI::Option* add_text(CLI::App& app, const std::string& name, std::optional<std::string>& out, const std::string& type,
                      const std::string& help);
// A switch that takes no value.
CLI::Option* add_flag(CLI::App& app, const std::string& name, bool& out, const std::string& help);
// The option must be given ("--profile is required").
CLI::Option* make_required(CLI::Option* option);

// "a whole number >= 1", "a whole number from 2 to 1024", "a number > 0", "cpu or cuda".
std::string describe_whole(std::int64_t min, std::int64_t max);
std::string describe_real(RealBound lo, std::optional<double> hi = std::nullopt);
std::string describe_choice(const std::vector<std::string>& allowed);

struct CommonOptions {
  std::string backend = "cpu";
  std::string scale = "local";
  std::string dtype = "fp32";
  std::string out_dir = "results";
  std::string trace_dir;  // empty: no trace
  bool profile = false;
  bool no_tensor_cores = false;
  bool list_devices = false;  // handled before parsing (see bench_main); listed in --help
  std::optional<int> warmup, iters, repetitions;  // nullopt: the scale's default
  std::optional<int> blas_threads;                // nullopt: OpenBLAS's own (OPENBLAS_NUM_THREADS)
  std::optional<double> comm_timeout_s;           // nullopt: Watchdog::kDefaultTimeoutSeconds
  std::optional<double> link_bandwidth_GBps, link_latency_us;  // an emulated link (cpu)

  Backend backend_kind() const { return backend == "cuda" ? Backend::cuda : Backend::cpu; }
  Scale scale_kind() const { return scale == "tiny" ? Scale::tiny : scale == "paper" ? Scale::paper : Scale::local; }
  DType dtype_kind() const { return *parse_dtype(dtype); }
  double comm_timeout() const { return comm_timeout_s.value_or(Watchdog::kDefaultTimeoutSeconds); }
};

void add_common_options(CLI::App& app, CommonOptions& o);
// CLI11's parse error as one line in words ("--tokens: needs a value; allowed: a whole number >= 1").
std::string usage_message(const CLI::ParseError& e, const CLI::App& app);

// "4096", "64K", "16M", "1G" (powers of 1024) -> bytes; nullopt if not a size.
std::optional<std::uint64_t> parse_size(const std::string& text);
std::string format_size(std::uint64_t bytes);

}  // namespace moebench
