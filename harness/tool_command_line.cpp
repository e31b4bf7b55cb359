#include "harness/tool_command_line.h"
#include <CLI/CLI.hpp>
#include <cstdio>

namespace moebench {

ToolCommandLine::ToolCommandLine(const std::string& program, const std::string& description)
    : program_(program), app_(std::make_unique<CLI::App>(description, program)) {}

ToolCommandLine::~ToolCommandLine() = default;

std::optional<int> ToolCommandLine::parse(int argc, char** argv) {
  try {
    app_->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_->exit(e);
    std::fprintf(stderr, "%s: error: %s\n", program_.c_str(), usage_message(e, *app_).c_str());
    return 2;
  }
  return std::nullopt;
}

}  // namespace moebench
