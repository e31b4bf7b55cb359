#include "models/mpmoe_perf_model.h"
#include <algorithm>

namespace moebench {

double Slowdowns::get(const std::string& y, const std::string& x) const {
  auto it = alpha.find({y, x});
  return it == alpha.end() ? 1.0 : it->second;
}

int paradigm(const std::string& strategy, bool backward) {
  if (strategy == "S1" || strategy == "S2" || strategy == "S3") return backward ? 3 : 2;
  return 1;
}

namespace {

// One slot's work: per stream, per operation kind.
struct Work {
  std::map<std::string, double> comm, comp, mem;  // kind -> ms alone
};

double sum(const std::map<std::string, double>& m) {
  double s = 0;
  for (const auto& [k, v] : m) s += v;
  return s;
}

std::string phase_of(int slot, int parts) {
  if (slot == 0) return "P0";
  if (slot == parts + 1) return "P4";
  if (parts >= 2 && slot == 1) return "P1";
  if (parts >= 2 && slot == parts) return "P3";
  return "P2";
}

PassPrediction evaluate(const std::vector<Work>& slots, int parts, const Slowdowns& a) {
  PassPrediction out;
  for (int k = 0; k < int(slots.size()); ++k) {
    const Work& w = slots[k];
    const double comm = sum(w.comm), comp = sum(w.comp), mem = sum(w.mem);
    // The other streams busy in the slot.
    auto beside = [&](const std::string& y) {
      std::vector<std::string> busy;
      if (y != "comm" && comm > 0) busy.push_back("comm");
      if (y != "comp" && comp > 0) busy.push_back("comp");
      if (y != "mem" && mem > 0) busy.push_back("mem");
      return busy;
    };
    auto factor = [&](const std::string& y) {
      const auto b = beside(y);
      return b.empty() ? 1.0 : b.size() == 2 ? a.get(y, "all") : a.get(y, b[0]);
    };
    const double f_comm = factor("comm"), f_comp = factor("comp"), f_mem = factor("mem");
    SlotPrediction s;
    s.phase = phase_of(k, parts);
    s.comm = comm;
    s.comp = comp;
    s.mem = mem;
    s.ms = std::max({comm / f_comm, comp / f_comp, mem / f_mem});
    for (const auto& [kind, ms] : w.comm) out.busy_ms[kind] += ms / f_comm;
    for (const auto& [kind, ms] : w.comp) out.busy_ms[kind] += ms / f_comp;
    for (const auto& [kind, ms] : w.mem) out.busy_ms[kind] += ms / f_mem;
    out.phase_ms[s.phase] += s.ms;
    out.ms += s.ms;
    out.slots.push_back(s);
  }
  for (const char* kind : {"S", "C", "R", "M"}) out.busy_ms.emplace(kind, 0.0);
  return out;
}

// Adds `ms` of `kind` to a stream's work (nothing for zero).
void put(std::map<std::string, double>& stream, const std::string& kind, double ms) {
  if (ms > 0) stream[kind] += ms;
}

}  // namespace

PassPrediction predict_forward(int n, const PartTimes& t, const Slowdowns& a) {
  std::vector<Work> slots(std::size_t(n) + 2);
  for (int k = 0; k <= n + 1; ++k) {
    Work& w = slots[k];
    if (k >= 1 && k <= n) put(w.comp, "C", t.c);
    if (k - 1 >= 1) put(w.comm, "R", t.r);                 // R_{k-1}
    if (k + 1 <= n) put(w.comm, "S", t.s);                 // S_{k+1}
    if (k >= 1 && k <= n) put(w.mem, "M", t.m_rows);       // T_DI_k, after S_k
    if (k - 1 >= 1 && k - 1 <= n) put(w.mem, "M", t.m_middle);  // T_M_{k-1}, after C_{k-1}
  }
  return evaluate(slots, n, a);
}

PassPrediction predict_backward(int n, const PartTimes& t, const Slowdowns& a) {
  std::vector<Work> slots(std::size_t(n) + 2);
  for (int k = 0; k <= n + 1; ++k) {
    Work& w = slots[k];
    if (k >= 1 && k <= n) {
      put(w.comp, "C", t.c_bwd);
      put(w.comp, "C", t.re_c);
    }
    if (k - 1 >= 1) put(w.comm, "S", t.s_bwd);      // S'_{k-1}
    if (k + 1 <= n) {                                 // part k+1 starts coming back
      put(w.comm, "R", t.r_bwd);
      put(w.comm, "S", t.re_s);
      put(w.mem, "M", t.m_rows_bwd + t.m_middle_bwd);
    }
  }
  return evaluate(slots, n, a);
}

}  // namespace moebench
