// The step model's M6-T gate: its k arg-max rounds over [T, E], and the [T, E, C] combine and
// dispatch tensors built in every round (the suite's looped gate, O(K^2)) or once (M6-T's own,
// O(K): 001 Sec. 3.3, and its Table 1 is a straight line in k). Priced by hand from the bytes.
#include <gtest/gtest.h>
#include <cmath>
#include "models/hardware_profile.h"
#include "models/paper_specs.h"
#include "models/step_model.h"

namespace moebench {
namespace {

double gating(int k, bool per_round, const HardwareProfile& hw) {
  ModelShape m = model_spec("m6t-3layer").shape;
  m.seq = 512;
  m.top_k = k;
  StepLayout l;
  l.kind = LayoutKind::dpmoe;
  l.dp = 8;
  l.micro_batch_sequences = 8;
  l.paper_gate = true;
  l.batched_experts = true;
  l.combine_per_round = per_round;
  return predict_step(m, l, hw).forward.moe_gating;
}

TEST(M6TGateModel, TheCombineTensorsEveryRoundOrOnce) {
  const HardwareProfile hw = load_profile_option("--m6t-profile", "m6t-v100");
  // 4096 tokens a GPU, 4096 experts, capacity ceil(1.25 k): 2, 5 and 20 slots at k = 1, 4, 16.
  const double tokens = 8 * 512, experts = 4096, layers = 3;
  auto tec_pass = [&](double capacity) { return layers * tokens * experts * capacity * 4 * 3 / hw.memory_bw; };
  EXPECT_DOUBLE_EQ(gating(1, true, hw), gating(1, false, hw));  // one round: the same work
  // Every round against once: k - 1 more passes over [T, E, C].
  EXPECT_NEAR(gating(16, true, hw) - gating(16, false, hw), 15 * tec_pass(20), 1e-9 * gating(16, true, hw));
  EXPECT_NEAR(gating(4, true, hw) - gating(4, false, hw), 3 * tec_pass(5), 1e-9 * gating(4, true, hw));
  // Once, the gate's growth from top-4 to top-16 stays near the capacity's (4x); in every round it
  // is near its square.
  EXPECT_LT(gating(16, false, hw) / gating(4, false, hw), 4.5);
  EXPECT_GT(gating(16, true, hw) / gating(4, true, hw), 10);
}

}  // namespace
}  // namespace moebench
