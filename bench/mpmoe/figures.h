// moebench_mpmoe's CSVs, one writer per figure of 003 (and pm, layer), from the cases it
// measured; rank 0 writes them into <out>/mpmoe/.
#pragma once
#include <string>
#include <vector>
#include "bench/mpmoe/cases.h"
#include "harness/bench.h"

namespace moebench::mpmoe {

struct Figures {
  const BenchContext& ctx;
  const std::vector<CaseResult>& cases;         // the timed figures'
  const std::vector<CaseResult>& memory_cases;  // f2's
  const PipelineConfig& pipe;                   // --experiments layer's configuration
  std::string dir;                              // <out>/mpmoe/

  void write_f2() const;
  void write_f3() const;
  void write_f9() const;
  void write_f10() const;
  void write_f11() const;
  void write_f12() const;
  void write_f13() const;
  void write_f14() const;
  void write_f15() const;
  void write_f16() const;
  void write_f17() const;
  void write_pm() const;
  void write_layer() const;
};

}  // namespace moebench::mpmoe
