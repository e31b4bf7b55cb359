#include "moe/init.h"
#include <algorithm>
#include <cmath>
#include <thread>

namespace moebench {

static std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Box-Muller on two counter-based uniforms: value i depends on (seed, id, i) alone.
static void fill_slice(float* out, std::size_t n, std::uint64_t seed, std::uint64_t id, float std_dev, std::size_t first) {
  const std::uint64_t key = splitmix64(seed * 0x100000001B3ull ^ splitmix64(id));
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint64_t i = first + j;
    const std::uint64_t a = splitmix64(key ^ (2 * i)), b = splitmix64(key ^ (2 * i + 1));
    const double u1 = (double(a >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
    const double u2 = double(b >> 11) * 0x1.0p-53;
    out[j] = static_cast<float>(std_dev * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}

// Each value depends on its index alone, so slices fill on threads and equal a serial fill bit
// for bit: a paper-scale MoE layer's experts hold half a billion values, 15 s on one core.
void fill_normal(float* out, std::size_t n, std::uint64_t seed, std::uint64_t id, float std_dev, std::size_t first) {
  constexpr std::size_t kMinSlice = std::size_t(1) << 20;
  if (n < 2 * kMinSlice) return fill_slice(out, n, seed, id, std_dev, first);
  static const std::size_t cores = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 32);
  const std::size_t slices = std::min(cores, (n + kMinSlice - 1) / kMinSlice);
  if (slices <= 1) return fill_slice(out, n, seed, id, std_dev, first);
  const std::size_t per = (n + slices - 1) / slices;
  std::vector<std::thread> workers;
  for (std::size_t s = 1; s * per < n; ++s)
    workers.emplace_back(fill_slice, out + s * per, std::min(per, n - s * per), seed, id, std_dev, first + s * per);
  fill_slice(out, per, seed, id, std_dev, first);
  for (std::thread& w : workers) w.join();
}

std::vector<float> normal_vector(std::size_t n, std::uint64_t seed, std::uint64_t id, float std_dev, std::size_t first) {
  std::vector<float> v(n);
  fill_normal(v.data(), n, seed, id, std_dev, first);
  return v;
}

}  // namespace moebench
