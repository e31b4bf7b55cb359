// moebench_mpmoe's CSVs, one writer per figure of 003 (and pm, layer), from the cases it
// measured; rank 0 writes them into <out>/mpmoe/.
#pragma once
#include <string>
#include <utility>
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
  // Every CSV of the experiments `has` names (pm's with f10, f15 or f16).
  template <class Has>
  void write_asked(Has has) const {
    const std::pair<const char*, void (Figures::*)() const> writers[] = {
        {"f2", &Figures::write_f2},   {"f3", &Figures::write_f3},   {"f9", &Figures::write_f9},   {"f10", &Figures::write_f10},
        {"f11", &Figures::write_f11}, {"f12", &Figures::write_f12}, {"f13", &Figures::write_f13}, {"f14", &Figures::write_f14},
        {"f15", &Figures::write_f15}, {"f16", &Figures::write_f16}, {"f17", &Figures::write_f17}, {"layer", &Figures::write_layer}};
    for (const auto& [e, write] : writers)
      if (has(e)) (this->*write)();
    if (has("f10") || has("f15") || has("f16")) write_pm();
  }
};

}  // namespace moebench::mpmoe
