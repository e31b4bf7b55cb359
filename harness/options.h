// Command-line options every moebench binary shares (CLI11), and the parsers for sizes.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include "kernels/dtype.h"
#include "kernels/exec.h"

namespace moebench {

enum class Scale { tiny, local, paper };
const char* scale_name(Scale s);

struct CommonOptions {
  std::string backend = "cpu";
  std::string scale = "local";
  std::string dtype = "fp32";
  std::string out_dir = "results";
  bool profile = false;
  bool no_tensor_cores = false;
  int warmup = -1;  // -1: the scale's default
  int iters = -1;
  double comm_timeout_s = 300.0;

  Backend backend_kind() const { return backend == "cuda" ? Backend::cuda : Backend::cpu; }
  Scale scale_kind() const { return scale == "tiny" ? Scale::tiny : scale == "paper" ? Scale::paper : Scale::local; }
  DType dtype_kind() const { return *parse_dtype(dtype); }
};

void add_common_options(CLI::App& app, CommonOptions& o);

// "4096", "64K", "16M", "1G" (powers of 1024) -> bytes; nullopt if not a size.
std::optional<std::uint64_t> parse_size(const std::string& text);
std::string format_size(std::uint64_t bytes);

}  // namespace moebench
