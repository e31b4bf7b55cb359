// gtest main for the GPU tests: a Runtime (world of one) around them, for the NCCL bootstrap.
#include <gtest/gtest.h>
#include "harness/runtime.h"

int main(int argc, char** argv) {
  moebench::Runtime rt(argc, argv, "moebench_gpu_tests");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
