#include "harness/options.h"
#include <cctype>

namespace moebench {

const char* scale_name(Scale s) {
  switch (s) {
    case Scale::tiny: return "tiny";
    case Scale::local: return "local";
    case Scale::paper: return "paper";
  }
  return "?";
}

void add_common_options(CLI::App& app, CommonOptions& o) {
  app.add_option("--backend", o.backend, "Where ops run: cpu (OpenBLAS, MPI) or cuda (cuBLAS, NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--scale", o.scale, "Problem sizes: tiny (tests), local (a 2-core machine), paper (the documents' own)")
      ->check(CLI::IsMember({"tiny", "local", "paper"}))
      ->capture_default_str();
  app.add_option("--dtype", o.dtype, "Element type of activations and weights: fp32, fp16, bf16 (cpu: fp32 only)")
      ->check(CLI::IsMember({"fp32", "fp16", "bf16"}))
      ->capture_default_str();
  app.add_option("--out", o.out_dir, "Folder the CSV results are written under")->capture_default_str();
  app.add_flag("--profile", o.profile,
               "Bracket only the measured iterations with cudaProfilerStart/Stop (nsys --capture-range=cudaProfilerApi)");
  app.add_flag("--no-tensor-cores", o.no_tensor_cores, "GEMMs without tensor cores (pedantic fp32 math)");
  app.add_option("--warmup", o.warmup, "Untimed iterations before each measurement (default: by scale)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--iters", o.iters, "Timed iterations per measurement (default: by scale)")->check(CLI::Range(1, 1000000));
  app.add_option("--comm-timeout", o.comm_timeout_s, "Seconds a GPU collective may run before the job is aborted")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

std::optional<std::uint64_t> parse_size(const std::string& text) {
  if (text.empty()) return std::nullopt;
  std::size_t i = 0;
  std::uint64_t v = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return std::nullopt;
  std::uint64_t mult = 1;
  if (i < text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[i]))) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: return std::nullopt;
    }
    ++i;
    if (i < text.size() && std::toupper(static_cast<unsigned char>(text[i])) == 'B') ++i;
  }
  if (i != text.size()) return std::nullopt;
  if (v > UINT64_MAX / mult) return std::nullopt;
  return v * mult;
}

std::string format_size(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return std::to_string(b >> 30) + "G";
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

}  // namespace moebench
