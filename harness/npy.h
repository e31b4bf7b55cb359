// NumPy .npy (format 1.0) writer for dumping a layer's tensors, so another framework can
// load them with numpy.load and cross-check.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace moebench {

void write_npy(const std::string& path, const float* data, const std::vector<std::size_t>& shape);
void write_npy(const std::string& path, const std::int32_t* data, const std::vector<std::size_t>& shape);

}  // namespace moebench
