// The command line of a tool that is not a bench (moebench_project, moebench_whatif,
// moebench_claims; a bench's is bench_main's): CLI11 held behind a pointer, so that the tool's
// file does not parse CLI11's headers, and one way to answer --help and bad input.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include "harness/options.h"

namespace moebench {

class ToolCommandLine {
 public:
  ToolCommandLine(const std::string& program, const std::string& description);
  ~ToolCommandLine();
  ToolCommandLine(const ToolCommandLine&) = delete;
  ToolCommandLine& operator=(const ToolCommandLine&) = delete;

  CLI::App& app() { return *app_; }
  // nullopt: parsed, the tool goes on. Otherwise the exit code to return: 0 after --help was
  // printed; 2 after bad input, told as one line "<program>: error: <what>" on stderr.
  std::optional<int> parse(int argc, char** argv);

 private:
  std::string program_;
  std::unique_ptr<CLI::App> app_;
};

}  // namespace moebench
