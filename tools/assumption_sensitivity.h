// What the assumptions decide (the claim ledger's item 7): every claim the model projects,
// re-projected with each assumed input of the papers' profiles moved to the ends of a stated
// range (models/assumption_ranges.csv: profile, input, low, high, unit, why), its value and
// verdict at each end beside the value at the profile's own input. An input is assumed where
// its profile says so: an assumption, or a curve transferred from another GPU. Inputs are the
// profiles' scalar fields in their own units, plus two scales ("x"): gemm_efficiency (the curve
// times the factor, each point at most 1) and overlap_slowdown (each alpha times the factor, at
// most 1: a large factor is perfect overlap).
#pragma once
#include <string>
#include <vector>
#include "models/hardware_profile.h"
#include "tools/claims/ledger.h"
#include "tools/paper_projections.h"

namespace moebench {

struct AssumedInput {
  std::string profile;  // PaperProfiles key: ppmoe, m6t, adira, valor
  std::string input, unit, why;
  double low = 0, high = 0;
};

// models/assumption_ranges.csv of the source tree.
std::string default_assumed_inputs_path();
// Reads and checks the ranges file; throws Error naming the file, the row and what is allowed.
std::vector<AssumedInput> read_assumed_inputs(const std::string& path);
// The input's value in `hw` (1 for a scale), in the input's unit.
double input_value(const HardwareProfile& hw, const AssumedInput& in);
// `hw` with the input set to `value` (its unit's); throws Error for an input it has no such field for.
HardwareProfile with_input(HardwareProfile hw, const AssumedInput& in, double value);

// One row per (claim, input) that moves the claim's modelled value by more than 0.1% or changes
// its verdict, the claims in `claims`' order and their inputs by how far they move them. The
// projections are written under `scratch` (created and removed).
ProjectedTable assumption_sensitivity(const PaperProfiles& base, const std::vector<AssumedInput>& inputs,
                                      const std::vector<ClaimSpec>& claims, const std::string& scratch);

}  // namespace moebench
