// Deterministic parameter and data initialisation: value i of tensor `id` under `seed` is the
// same on every rank and layout, so a layer split over ranks holds exactly the weights of the
// single-rank reference.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace moebench {

// N(0, std^2) values number [first, first + n) of the stream (seed, id).
void fill_normal(float* out, std::size_t n, std::uint64_t seed, std::uint64_t id, float std_dev,
                 std::size_t first = 0);
std::vector<float> normal_vector(std::size_t n, std::uint64_t seed, std::uint64_t id, float std_dev,
                                 std::size_t first = 0);

}  // namespace moebench
