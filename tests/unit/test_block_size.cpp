// The pool's size classes (runtime/block_size.h) and what they are for: requests that grow a
// little every step, as an MoE layer's routed rows do while its gate trains, reuse their blocks.
#include <gtest/gtest.h>
#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <cstdio>
#include <cstdlib>
#include <sys/resource.h>
#include <unistd.h>
#include "runtime/allocator.h"
#include "runtime/block_size.h"
#include "runtime/device.h"

namespace moebench {

TEST(BlockSize, AClassHoldsTheRequestWithAtMostAnEighthMore) {
  EXPECT_EQ(pool_block_size(0), 0u);
  EXPECT_EQ(pool_block_size(1), kBlockAlignment);
  EXPECT_EQ(pool_block_size(1000), 1024u);
  EXPECT_EQ(pool_block_size(kFineBlockLimit), kFineBlockLimit);
  EXPECT_EQ(pool_block_size(kFineBlockLimit + 1), kFineBlockLimit + kFineBlockLimit / 8);
  std::size_t previous = 0;
  for (std::size_t bytes = 1; bytes < (std::size_t(1) << 31); bytes = bytes * 17 / 16 + 37) {
    const std::size_t block = pool_block_size(bytes);
    ASSERT_GE(block, bytes);
    ASSERT_EQ(block % kBlockAlignment, 0u) << bytes;
    ASSERT_GE(block, previous) << bytes;  // a larger request never gets a smaller block
    if (bytes <= kFineBlockLimit)
      ASSERT_LT(block - bytes, kBlockAlignment) << bytes;
    else
      ASSERT_LE(double(block), double(bytes) * (1 + 1.0 / kClassesPerDoubling)) << bytes;
    previous = block;
  }
}

TEST(BlockSize, EachDoublingAboveTheFineLimitHasItsClassesOnly) {
  for (std::size_t low : {kFineBlockLimit, std::size_t(16) << 20, std::size_t(1) << 30}) {
    std::set<std::size_t> classes;
    for (std::size_t bytes = low + 1; bytes <= 2 * low; bytes += low / 1000) classes.insert(pool_block_size(bytes));
    EXPECT_EQ(classes.size(), std::size_t(kClassesPerDoubling)) << low;
  }
}

// Two buffers a step whose sizes grow by 1% a step, as the expert rows of a training MoE step
// do: each size class is taken from the system once per buffer alive at a time. With blocks of
// the exact (512-byte rounded) size every step took two new blocks.
TEST(AllocatorPool, RequestsThatGrowEachStepFindTheirBlocksAgain) {
  TrackingAllocator a(Backend::cpu);
  std::set<std::size_t> classes;
  double bytes = 3.4e6;
  const int steps = 30;
  for (int step = 0; step < steps; ++step, bytes *= 1.01) {
    Buffer rows = a.allocate(std::size_t(bytes), MemTag::activations);
    Buffer grad = a.allocate(std::size_t(bytes), MemTag::temporary);
    classes.insert(pool_block_size(std::size_t(bytes)));
  }
  EXPECT_LT(classes.size(), std::size_t(steps) / 4);  // the sizes cross a few classes
  EXPECT_LE(a.system_allocations(), std::int64_t(2 * classes.size()));
  EXPECT_LE(a.reserved_bytes(), 2 * std::accumulate(classes.begin(), classes.end(), std::size_t(0)));
}

// The child of the test below: caps its address space 768 MiB above what it holds once a 1 GiB
// block is cached, so that a 1.25 GiB request fits only after that block has gone back to the
// system. The margin leaves 512 MiB for what other threads map meanwhile (OpenBLAS's server
// thread maps a 128 MiB buffer at a moment of its own). Exits 0 when the request was served by a
// second block from the system.
[[noreturn]] void allocate_beyond_a_cached_block_under_a_cap() {
  TrackingAllocator a(Backend::cpu);
  const std::size_t cached = std::size_t(1) << 30, wanted = std::size_t(1280) << 20, headroom = std::size_t(768) << 20;
  { Buffer b = a.allocate(cached, MemTag::activations); }  // back in the pool, too small to serve `wanted`
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  unsigned long pages = 0;
  if (!f || std::fscanf(f, "%lu", &pages) != 1) std::_Exit(3);
  std::fclose(f);
  rlimit cap{};
  if (getrlimit(RLIMIT_AS, &cap) != 0) std::_Exit(4);
  cap.rlim_cur = rlim_t(pages) * rlim_t(sysconf(_SC_PAGESIZE)) + rlim_t(headroom);  // the soft limit alone: no privilege needed
  if (setrlimit(RLIMIT_AS, &cap) != 0) std::_Exit(4);
  try {
    Buffer b = a.allocate(wanted, MemTag::activations);
    std::_Exit(a.reserved_bytes() == pool_block_size(wanted) && a.system_allocations() == 2 ? 0 : 5);
  } catch (const Error&) {
    std::_Exit(6);  // out of memory: the cache was kept
  }
}

// When the system refuses a block, the pool gives its cached blocks back and asks again: a
// cache of blocks too small for the request must not turn into an out-of-memory error.
TEST(AllocatorPool, ARefusedAllocationRetriesAfterGivingTheCacheBack) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "a sanitizer's own reservations do not fit under an address-space cap";
#endif
  rlimit inherited{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &inherited), 0);
  if (inherited.rlim_max != RLIM_INFINITY && inherited.rlim_max < (rlim_t(8) << 30))
    GTEST_SKIP() << "this process's address space is capped at " << inherited.rlim_max << " bytes already";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child re-executes this binary: with one OpenBLAS thread it starts no server thread that
  // maps memory while it measures (the margin above covers what else might).
  const char* inherited_threads = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string restore = inherited_threads ? inherited_threads : "";
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  EXPECT_EXIT(allocate_beyond_a_cached_block_under_a_cap(), ::testing::ExitedWithCode(0), "");
  if (inherited_threads)
    setenv("OPENBLAS_NUM_THREADS", restore.c_str(), 1);
  else
    unsetenv("OPENBLAS_NUM_THREADS");
}

}  // namespace moebench
