// The papers' configurations as step-model inputs, and the projected tables beside the papers'
// values: 000 Tables 1-3 on the 000 cluster, 001 Table 1 on the 001 machine. Calibration comes
// from hardware data and the suite's micro-benchmarks only (the profile files); nothing is fitted
// to a paper's own numbers. Where a paper leaves an input out (000 gives no batch size), the
// assumption is named in each row.
#pragma once
#include <optional>
#include <string>
#include <vector>
#include "harness/csv.h"
#include "models/hardware_profile.h"
#include "models/step_model.h"

namespace moebench {

// 000 Table 2: one row.
struct T2Row {
  std::string model;  // "0.3B Dense", "6.7B DPMoE", ...
  LayoutKind kind;
  int dp, tp, pp, ep;
  bool zero;
  int gpus;
  std::string paper_id;     // experiments/reference/values.csv: "000.t2.r<row>"
  std::string setting;      // "small" or "large"
  double paper_throughput() const;  // tokens/s/GPU
};
const std::vector<T2Row>& ppmoe_t2_rows();
// The model and layout of a row (with its assumptions: global batch, micro-batch size).
ModelShape t2_model(const T2Row& r);
StepLayout t2_layout(const T2Row& r, const HardwareProfile& hw);
std::string t2_assumptions(const T2Row& r, const StepLayout& l);

// The calibration column of every projected row.
inline constexpr const char* kCalibration =
    "calibrated from hardware data and the suite's micro-benchmarks only; nothing fitted to the paper";

struct ProjectedTable {
  CsvTable table;
  std::vector<std::string> summary;  // lines for the console: targets and verdicts
};

// `dtype`: what the modelled runs compute in (fp16 at the papers' scale, fp32 for this
// machine's local runs).
Provenance model_provenance(const HardwareProfile& hw, int gpus, const std::string& scale, const std::string& dtype);

ProjectedTable project_ppmoe_t2(const HardwareProfile& hw);
// The orderings 000 Sec. 4.3 reports for Table 2, each with whether the model reproduces it.
struct Ordering {
  std::string claim;
  bool reproduced;
  std::string detail;  // the modelled throughputs compared
};
std::vector<Ordering> ppmoe_t2_orderings(const HardwareProfile& hw);
ProjectedTable project_ppmoe_t2_orderings(const HardwareProfile& hw);
ProjectedTable project_ppmoe_t1(const HardwareProfile& hw);
ProjectedTable project_ppmoe_t3(const HardwareProfile& hw);
ProjectedTable project_m6t_t1(const HardwareProfile& hw);
// The papers' parameter counts (000 Sec. 4.1, 001 Table 3) computed from the specs in models/.
ProjectedTable project_parameter_counts();
// 001 A.3: the expert matmuls' share of an MoE FFN layer's forward FLOPs, from the M6-T specs.
ProjectedTable project_m6t_layer_flops();

}  // namespace moebench
