// Files written whole or not at all: a temporary <path>.tmp.<pid> beside the target, flushed
// and synced, then renamed over it (a killed run leaves the old file, never half a new one).
#pragma once
#include <string>

namespace moebench {

// Writes `contents` to `path` atomically, creating parent folders; throws Error on failure,
// leaving `path` untouched.
void write_file_atomic(const std::string& path, const std::string& contents);

}  // namespace moebench
