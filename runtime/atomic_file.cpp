#include "runtime/atomic_file.h"
#include <cstdio>
#include <filesystem>
#include <unistd.h>
#include "kernels/exec.h"

namespace moebench {

void write_file_atomic(const std::string& path, const std::string& contents) {
  namespace fs = std::filesystem;
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) throw Error("cannot create folder " + target.parent_path().string() + ": " + ec.message());
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) throw Error("cannot write " + tmp);
    const bool ok = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size() && std::fflush(f) == 0 &&
                    ::fsync(::fileno(f)) == 0;
    std::fclose(f);
    if (!ok) {
      fs::remove(tmp, ec);
      throw Error("failed writing " + tmp);
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp);
    throw Error("cannot rename " + tmp + " to " + path + ": " + ec.message());
  }
}

}  // namespace moebench
