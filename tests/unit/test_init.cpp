// Deterministic initialisation filled on threads: every value equals the one a fill of that
// value alone gives, wherever the slices fall.
#include <gtest/gtest.h>
#include <cstring>
#include "moe/init.h"

namespace moebench {

TEST(DeterministicInit, AFillOnThreadsEqualsEachValueFilledAlone) {
  const std::size_t n = (std::size_t(5) << 20) + 3, first = 1000;  // several slices wherever there are 2+ cores
  const std::vector<float> whole = normal_vector(n, 11, 42, 0.5f, first);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float one = 0;
    fill_normal(&one, 1, 11, 42, 0.5f, first + i);
    differ += std::memcmp(&one, &whole[i], sizeof(float)) != 0;
  }
  EXPECT_EQ(differ, 0u);
  // A window of the stream, itself large enough for threads, is that part of the whole.
  const std::size_t from = 777777, count = (std::size_t(3) << 20) + 11;
  const std::vector<float> window = normal_vector(count, 11, 42, 0.5f, first + from);
  EXPECT_EQ(std::memcmp(window.data(), whole.data() + from, count * sizeof(float)), 0);
  // Another stream or seed is not the same values.
  EXPECT_NE(normal_vector(8, 11, 43, 0.5f, first), std::vector<float>(whole.begin(), whole.begin() + 8));
  EXPECT_NE(normal_vector(8, 12, 42, 0.5f, first), std::vector<float>(whole.begin(), whole.begin() + 8));
}

}  // namespace moebench
