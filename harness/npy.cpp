#include "harness/npy.h"
#include "runtime/atomic_file.h"

namespace moebench {

static void write(const std::string& path, const void* data, std::size_t elem, const char* descr,
                  const std::vector<std::size_t>& shape) {
  std::string dims;
  std::size_t count = 1;
  for (std::size_t d : shape) {
    dims += std::to_string(d) + ",";
    count *= d;
  }
  if (shape.size() > 1) dims.pop_back();  // (n,) for 1-d, (a,b) otherwise
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + header length (2) + header, padded with spaces to a multiple of 64, ending in \n
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>((header.size() >> 8) & 0xff);
  out += header;
  out.append(static_cast<const char*>(data), count * elem);
  write_file_atomic(path, out);
}

void write_npy(const std::string& path, const float* data, const std::vector<std::size_t>& shape) {
  write(path, data, 4, "<f4", shape);
}
void write_npy(const std::string& path, const std::int32_t* data, const std::vector<std::size_t>& shape) {
  write(path, data, 4, "<i4", shape);
}

}  // namespace moebench
