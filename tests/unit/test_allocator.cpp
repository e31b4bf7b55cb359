#include <gtest/gtest.h>
#include <chrono>
#include <cmath>
#include <thread>
#include "runtime/device.h"
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

// The pool: a freed block is handed out again on the same stream, never given back to the system.
TEST(AllocatorPool, ReusesBlocksOnTheSameStreamWithoutSystemCalls) {
  TrackingAllocator a(Backend::cpu);
  void* first = nullptr;
  for (int i = 0; i < 10; ++i) {
    Buffer b = a.allocate(1000, MemTag::activations);
    if (!first) first = b.data();
    EXPECT_EQ(b.data(), first) << i;
  }
  EXPECT_EQ(a.system_allocations(), 1);
  EXPECT_EQ(a.allocations(), 10);
  EXPECT_EQ(a.reserved_bytes(), 1024u);  // rounded to 512-byte multiples
  EXPECT_EQ(a.current_total(), 0u);
  a.trim();
  EXPECT_EQ(a.reserved_bytes(), 0u);
}

// n micro-batches each need a T_M-like buffer of X bytes and an activation of Y bytes they keep:
// with the buffer released after each micro-batch the peak is n Y + X, hand-computed, and the
// pool holds X once; holding every buffer would peak at n (X + Y).
TEST(AllocatorPool, ReuseAcrossMicroBatchesGivesTheHandComputedPeak) {
  TrackingAllocator a(Backend::cpu);
  const std::size_t X = 40960, Y = 1024;
  const int n = 4;
  std::vector<Buffer> kept;
  for (int m = 0; m < n; ++m) {
    Buffer work = a.allocate(X, MemTag::buffers);
    kept.push_back(a.allocate(Y, MemTag::activations));
  }  // `work` released at the end of each micro-batch
  EXPECT_EQ(a.peak_total(), n * Y + X);
  EXPECT_EQ(a.peak(MemTag::buffers), X);
  EXPECT_EQ(a.peak(MemTag::activations), n * Y);
  EXPECT_EQ(a.system_allocations(), 1 + n);  // one X block, reused; n Y blocks
  kept.clear();
  a.reset_peaks();
  std::vector<Buffer> all;
  for (int m = 0; m < n; ++m) {
    all.push_back(a.allocate(X, MemTag::buffers));
    all.push_back(a.allocate(Y, MemTag::activations));
  }
  EXPECT_EQ(a.peak_total(), n * (X + Y));
}

// A block freed on one stream is taken by another only after the work the first stream queued
// before freeing it: the second stream's write lands after the first's.
TEST(AllocatorPool, AnotherStreamReusesABlockOnlyAfterAnEvent) {
  Device dev = Device::open(Backend::cpu);
  Stream s1 = dev.create_stream("s1"), s2 = dev.create_stream("s2");
  TrackingAllocator a(Backend::cpu);
  Buffer b1 = a.allocate(4096, MemTag::temporary, s1);
  float* p = b1.as<float>();
  run_on(s1, "slow write", [p] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    p[0] = 1.f;
  });
  b1.release();  // s1 is still sleeping
  Buffer b2 = a.allocate(4096, MemTag::temporary, s2);
  ASSERT_EQ(b2.data(), p);  // the same block, handed to s2 behind an event
  run_on(s2, "write", [p] { p[0] = 2.f; });
  dev.synchronize();
  EXPECT_EQ(p[0], 2.f);
  EXPECT_EQ(a.system_allocations(), 1);
}

// A block used on a second stream (record_stream) returns to the pool only when that stream's
// work is done: until then an allocation gets another block.
TEST(AllocatorPool, RecordedStreamsKeepABlockUntilTheirWorkIsDone) {
  Device dev = Device::open(Backend::cpu);
  Stream s1 = dev.create_stream("s1"), s2 = dev.create_stream("s2");
  TrackingAllocator a(Backend::cpu);
  Buffer b = a.allocate(4096, MemTag::temporary, s1);
  void* p = b.data();
  run_on(s2, "slow read", [] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
  b.record_stream(s2);
  b.release();
  Buffer other = a.allocate(4096, MemTag::temporary, s1);
  EXPECT_NE(other.data(), p);
  s2.synchronize();
  Buffer again = a.allocate(4096, MemTag::temporary, s1);
  EXPECT_EQ(again.data(), p);
  EXPECT_EQ(a.system_allocations(), 2);
}

// Debug mode: freed memory and memory handed out again read as 0xFF bytes (NaN), so reading a
// buffer after it was released, or before it was written, shows up in the results.
TEST(AllocatorPool, PoisonMakesAUseAfterFreeOrReuseVisible) {
  TrackingAllocator a(Backend::cpu);
  a.set_poison(true);
  Buffer b = a.allocate(64 * 4, MemTag::activations);
  for (int i = 0; i < 64; ++i) b.as<float>()[i] = 1.f;
  float* stale = b.as<float>();
  b.release();
  EXPECT_TRUE(std::isnan(stale[0]));  // the stale pointer sees poison, not the old ones
  Buffer reused = a.allocate(64 * 4, MemTag::activations);
  ASSERT_EQ(reused.as<float>(), stale);
  EXPECT_TRUE(std::isnan(reused.as<float>()[63]));  // handed out unwritten: poison too
  EXPECT_EQ(reinterpret_cast<std::int32_t*>(reused.as<float>())[0], -1);
}

// The poison fill of a buffer released while another stream still reads it waits for that
// stream: what the reader sees is the data, and the fill lands after it.
TEST(AllocatorPool, PoisonWaitsForTheStreamsThatStillUseTheBlock) {
  Device dev = Device::open(Backend::cpu);
  Stream owner = dev.create_stream("owner"), reader = dev.create_stream("reader");
  TrackingAllocator a(Backend::cpu);
  a.set_poison(true);
  Buffer b = a.allocate(64 * 4, MemTag::buffers, owner);
  float* p = b.as<float>();
  run_on(owner, "fill", [p] {
    for (int i = 0; i < 64; ++i) p[i] = 2.f;
  });
  Event filled(Backend::cpu);
  filled.record(owner);
  filled.make_wait(reader);
  float seen = 0.f;
  run_on(reader, "slow read", [p, &seen] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    seen = p[63];
  });
  b.record_stream(reader);
  b.release();  // now, while the reader sleeps
  dev.synchronize();
  EXPECT_EQ(seen, 2.f);
  EXPECT_TRUE(std::isnan(p[0]));  // and the fill did land
}

// Stream ids are timeline tracks, not identities: every device's default stream is track 0. A
// block freed on a stream with work still queued goes to another stream of the same id only
// behind an event (on the GPU, the legacy stream's poison fill landed after the next user's
// writes: cuBLAS then read 0xFF pointers).
TEST(AllocatorPool, AStreamSharingAnIdIsStillAnotherStream) {
  Device dev = Device::open(Backend::cpu);
  Stream worker = dev.create_stream("worker");
  worker.id = dev.default_stream().id;  // as another device's default stream would have
  TrackingAllocator a(Backend::cpu, dev.default_stream());
  a.set_poison(true);
  Buffer b = a.allocate(64 * 4, MemTag::buffers, worker);
  run_on(worker, "slow work", [] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  b.release();  // its poison fill is queued on the worker, behind the sleep
  Buffer next = a.allocate(64 * 4, MemTag::buffers);  // on the default stream: the host itself
  for (int i = 0; i < 64; ++i) next.as<float>()[i] = 3.f;
  dev.synchronize();
  EXPECT_EQ(next.as<float>()[0], 3.f);
  EXPECT_EQ(next.as<float>()[63], 3.f);
}

// On cuda the allocator's default stream must be the device's: the CUDA legacy stream (a Stream
// without a handle) is not ordered with the device's non-blocking streams.
TEST(TrackingAllocator, OnCudaItsDefaultStreamMustBeOneOfTheDevices) {
  try {
    TrackingAllocator a(Backend::cuda);
    FAIL() << "a cuda allocator without a stream was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Device::default_stream()"), std::string::npos) << e.what();
  }
}

TEST(AllocatorPool, PinnedHostMemoryIsCountedApartFromDeviceTags) {
  TrackingAllocator a(Backend::cpu);
  Buffer p = a.allocate_pinned(5000, MemTag::activations, Stream{});
  EXPECT_EQ(a.pinned_current(), 5000u);
  EXPECT_EQ(a.current_total(), 0u);
  p.release();
  EXPECT_EQ(a.pinned_current(), 0u);
  EXPECT_EQ(a.pinned_peak(), 5000u);
}

}  // namespace moebench
