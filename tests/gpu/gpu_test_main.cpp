// gtest main for the GPU tests: a Runtime (world of one) around them, for the NCCL bootstrap.
// With no GPU it prints one marker line that CTest reads as "skipped" -- unless
// MOEBENCH_REQUIRE_GPU=1 (scripts/gpu_box.sh sets it), where a missing device or a broken
// driver is a failure; with a GPU every failure shows as a failure (a per-test skip must not
// hide another test's failure). MOEBENCH_GPU_TESTS_ON_CPU=1 runs the tests on the CPU device.
#include <gtest/gtest.h>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include "runtime/device.h"
#include "runtime/runtime.h"

int main(int argc, char** argv) {
  moebench::Runtime rt(argc, argv, "moebench_gpu_tests");
  ::testing::InitGoogleTest(&argc, argv);
  std::string why;
  const char* on_cpu = std::getenv("MOEBENCH_GPU_TESTS_ON_CPU");  // gpu_test_util.h: the tests' logic on the CPU
  if (on_cpu && std::strcmp(on_cpu, "1") == 0) return RUN_ALL_TESTS();
  if (moebench::Device::cuda_device_count(&why) == 0) {
    const char* required = std::getenv("MOEBENCH_REQUIRE_GPU");
    if (required && std::strcmp(required, "1") == 0) {
      std::cout << "moebench_gpu_tests: error: MOEBENCH_REQUIRE_GPU=1 and no usable GPU (" << why << ")" << std::endl;
      return 1;
    }
    std::cout << "MOEBENCH_NO_GPU: GPU tests skipped (" << why << ")" << std::endl;
    return 0;
  }
  return RUN_ALL_TESTS();
}
