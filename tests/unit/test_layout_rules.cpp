// The layouts' table (models/layout.h) and the trainer's rules for a layout (models/layout_rules.h):
// every row parses by its option and its name, and moebench_whatif's rule and the step model refuse
// what the trainer refuses, the former in the trainer's words (cli.bad_input.whatif.* hold the
// program's lines).
#include <gtest/gtest.h>
#include "gpt/gpt_layout.h"
#include "models/hardware_profile.h"
#include "models/layout_rules.h"
#include "models/step_model.h"

namespace moebench {
namespace {

TEST(LayoutTable, EveryRowParsesByItsOptionAndItsName) {
  for (const LayoutRow& r : layout_table()) {
    EXPECT_EQ(parse_layout_option(r.option), r.kind) << r.option;
    EXPECT_EQ(parse_layout_name(r.name), r.kind) << r.name;
    EXPECT_STREQ(layout_kind_name(r.kind), r.name);
  }
  EXPECT_FALSE(parse_layout_option("DPMoE"));
  EXPECT_FALSE(parse_layout_name("dpmoe"));
  EXPECT_EQ(layout_options(), (std::vector<std::string>{"dense", "dpmoe", "ppmoe"}));
  EXPECT_EQ(expert_group_size(LayoutKind::dpmoe, 4, 2), 4);
  EXPECT_EQ(expert_group_size(LayoutKind::ppmoe, 4, 2), 2);
  EXPECT_EQ(expert_group_size(LayoutKind::dense, 4, 2), 1);
}

TEST(LayoutRules, WhatifAndTheStepModelRefuseWhatTheTrainerRefuses) {
  const HardwareProfile hw = load_profile_option("--profile", "h100-node");
  const ModelShape good{.layers = 4, .hidden = 64, .ffn = 256, .heads = 4, .seq = 32, .vocab = 100, .experts = 8, .moe_every = 2};
  struct Case {
    const char* what;
    ModelShape m;
    LayoutKind kind;
    int dp, tp, pp;
  };
  auto with = [&](auto change) {
    ModelShape m = good;
    change(m);
    return m;
  };
  const std::vector<Case> cases = {
      {"stages that do not hold the layers", with([](ModelShape& m) { m.layers = 6; }), LayoutKind::dense, 1, 1, 4},
      {"TP not dividing the heads", good, LayoutKind::dense, 1, 8, 1},
      {"TP not dividing the FFN", with([](ModelShape& m) { m.ffn = 250; }), LayoutKind::ppmoe, 1, 4, 1},
      {"heads not dividing the hidden size", with([](ModelShape& m) { m.hidden = 66; }), LayoutKind::dense, 2, 1, 1},
      {"experts over the DP group", with([](ModelShape& m) { m.experts = 6; }), LayoutKind::dpmoe, 4, 1, 1},
      {"experts over the TP group", with([](ModelShape& m) { m.experts = 6; }), LayoutKind::ppmoe, 1, 4, 1},
      {"an MoE layout without experts", good.dense(), LayoutKind::dpmoe, 2, 1, 1},
  };
  for (const Case& c : cases) {
    const ParallelLayout trained = ParallelLayout::of(c.kind, c.dp, c.tp, c.pp);
    const std::optional<std::string> trainer = validate_layout(trained, c.m, trained.world());
    ASSERT_TRUE(trainer) << c.what << ": the trainer takes it";
    StepLayout l;
    l.kind = c.kind;
    l.dp = c.dp, l.tp = c.tp, l.pp = c.pp;
    l.micro_batches = 2 * c.pp;
    // moebench_whatif asks the trainer's rule first, then the step model's.
    EXPECT_EQ(trainer_layout_error(c.m, c.kind, c.dp, c.tp, c.pp), trainer) << c.what;
    EXPECT_TRUE(validate_step(c.m, l, hw)) << c.what;
  }
  // Both take a layout the trainer runs ...
  StepLayout l;
  l.kind = LayoutKind::ppmoe;
  l.tp = 4;
  EXPECT_FALSE(validate_layout(ParallelLayout::of(LayoutKind::ppmoe, 1, 4, 1), good, 4));
  EXPECT_FALSE(validate_step(good, l, hw));
  // ... and the step model alone a DP group that outnumbers the experts, which the trainer, and so
  // moebench_whatif, refuses.
  l.kind = LayoutKind::dpmoe;
  l.tp = 1;
  l.dp = 16;
  EXPECT_FALSE(validate_step(good, l, hw));
  EXPECT_TRUE(trainer_layout_error(good, LayoutKind::dpmoe, 16, 1, 1));
}

}  // namespace
}  // namespace moebench
