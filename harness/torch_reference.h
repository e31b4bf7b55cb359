// PyTorch's run beside a bench's (experiments/moe/torch_layer.py, experiments/gpt/torch_step.py):
// its CSV read and held against our run before any work, and its fastest variant that ran. A CSV
// of other sizes or another dtype is refused, naming --reference; a variant that did not run
// there (its status says why) is passed over.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include "kernels/dtype.h"

namespace moebench {

struct TorchRun {
  std::string variant, torch, device, math;
  double ms = 0, ms_min = 0, ms_max = 0;
  std::map<std::string, std::string> cells;  // every column of its row
  const std::string& cell(const std::string& column) const;
};

struct TorchCsv {
  std::string path;          // --reference's value
  std::string ms_column;     // the time: "ms" (torch_layer.py) or "ms_per_step" (torch_step.py)
  std::string group_column;  // the fastest per value of this column ("model"); empty: one for the file
  std::string dtype_hint;    // said after a dtype mismatch, e.g. "; run torch_step.py with --dtype fp16"
};

// Why a row is not of our run (its sizes), or nullopt.
using OtherRun = std::function<std::optional<std::string>(const TorchRun& row)>;

// The fastest row that ran, per group ("" when the spec has no group column), into `fastest`; or why not.
std::optional<std::string> read_torch_csv(const TorchCsv& spec, DType dtype, const OtherRun& other_run,
                                          std::map<std::string, TorchRun>* fastest);

}  // namespace moebench
