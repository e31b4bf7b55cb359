// Before any measuring: can every output be written? A folder path is checked by creating
// and removing a probe file in its nearest existing ancestor (nothing is left behind, no
// folder is created), so an unwritable --out, --dump or --benchmark_out fails in a second,
// not after hours of measuring. Also removes temporary files of our own naming
// (<file>.tmp.<pid>, see write_file_atomic) that a killed run left behind.
#pragma once
#include <optional>
#include <string>

namespace moebench {

// An error naming `option` if files cannot be created in folder `dir` (created later as needed).
std::optional<std::string> check_output_folder(const std::string& option, const std::string& dir);
// An error naming `option` if `file` cannot be written (its folder as above; not a folder itself).
std::optional<std::string> check_output_file(const std::string& option, const std::string& file);
// Removes <name>.tmp.<pid> files in `dir` whose process no longer runs on this host; returns how many.
int remove_stale_temporaries(const std::string& dir);

}  // namespace moebench
