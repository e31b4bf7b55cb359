// The model of residual MLP blocks that the pipeline engine's tests split into stages, one block
// or more per rank at 1, 2 and 4 ranks, and the world those tests run in: a stage per rank.
#pragma once
#include <gtest/gtest.h>
#include "test_backend.h"

namespace moebench::mlp_pipeline_model {
inline constexpr int kLayers = 4, kHidden = 8, kFfn = 12, kRows = 3;

// P stages, this rank's the stage-th; the model's blocks divide over them.
class StagePerRank : public test_backend::WorldTest<test_backend::WorldOf::mpi> {
 protected:
  void SetUp() override {
    WorldTest::SetUp();
    P = n;
    stage = r;
    ASSERT_EQ(kLayers % P, 0) << "run at 1, 2 or 4 ranks";
  }
  int P = 1, stage = 0;
};
}  // namespace moebench::mlp_pipeline_model
