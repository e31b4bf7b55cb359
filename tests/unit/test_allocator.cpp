#include <gtest/gtest.h>
#include "runtime/allocator.h"

namespace moebench {

TEST(TrackingAllocator, CountsCurrentAndPeakPerTag) {
  TrackingAllocator a(Backend::cpu);
  {
    Buffer w = a.allocate(1000, MemTag::model_states);
    Buffer x = a.allocate(300, MemTag::activations);
    EXPECT_EQ(a.current(MemTag::model_states), 1000u);
    EXPECT_EQ(a.current(MemTag::activations), 300u);
    EXPECT_EQ(a.current_total(), 1300u);
    {
      Buffer t = a.allocate(500, MemTag::temporary);
      EXPECT_EQ(a.peak_total(), 1800u);
    }
    EXPECT_EQ(a.current(MemTag::temporary), 0u);
    EXPECT_EQ(a.peak(MemTag::temporary), 500u);
    EXPECT_EQ(a.current_total(), 1300u);
    Buffer moved = std::move(x);
    EXPECT_EQ(a.current(MemTag::activations), 300u);  // a move is not a new allocation
    EXPECT_FALSE(static_cast<bool>(x));
  }
  EXPECT_EQ(a.current_total(), 0u);
  EXPECT_EQ(a.peak_total(), 1800u);
  EXPECT_EQ(a.peak(MemTag::model_states), 1000u);
  a.reset_peaks();
  EXPECT_EQ(a.peak_total(), 0u);
  EXPECT_EQ(a.allocations(), 3);
}

TEST(TrackingAllocator, BuffersAreAlignedAndWritable) {
  TrackingAllocator a(Backend::cpu);
  Buffer b = a.allocate(4096, MemTag::buffers);
  ASSERT_TRUE(b);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 256, 0u);
  for (int i = 0; i < 1024; ++i) b.as<float>()[i] = float(i);
  EXPECT_EQ(b.as<float>()[1023], 1023.f);
}

TEST(TrackingAllocator, ImpossibleSizeIsAClearError) {
  TrackingAllocator a(Backend::cpu);
  try {
    Buffer b = a.allocate(std::size_t(1) << 62, MemTag::activations);
    FAIL() << "allocation of 4 EiB succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("activations"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.current_total(), 0u);
}

TEST(TrackingAllocator, ZeroBytesIsEmpty) {
  TrackingAllocator a(Backend::cpu);
  Buffer b = a.allocate(0, MemTag::buffers);
  EXPECT_FALSE(static_cast<bool>(b));
  EXPECT_EQ(a.current_total(), 0u);
}

// A buffer may outlive the allocator object it came from (a bench member freed after main's
// locals): it is still released correctly and counted in the books it came from.
TEST(TrackingAllocator, BufferOutlivingItsAllocatorIsReleasedSafely) {
  Buffer survivor;
  {
    TrackingAllocator a(Backend::cpu);
    survivor = a.allocate(4096, MemTag::buffers);
    survivor.as<float>()[0] = 1.f;
  }
  EXPECT_TRUE(static_cast<bool>(survivor));
  survivor.release();
  EXPECT_FALSE(static_cast<bool>(survivor));
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(3.0 * 1024 * 1024 * 1024), "3.00 GiB");
}

}  // namespace moebench
