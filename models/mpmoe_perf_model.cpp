#include "models/mpmoe_perf_model.h"
#include <algorithm>
#include <stdexcept>

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

// One slot's work: per stream, its operations in order (kind, ms alone).
struct SlotWork {
  std::vector<std::pair<std::string, double>> comm, comp, mem;
};

std::string phase_of(int slot, int parts) {
  if (slot == 0) return "P0";
  if (slot == parts + 1) return "P4";
  if (parts >= 2 && slot == 1) return "P1";
  if (parts >= 2 && slot == parts) return "P3";
  return "P2";
}

double total(const std::vector<std::pair<std::string, double>>& ops) {
  double t = 0;
  for (const auto& [k, ms] : ops) t += ms;
  return t;
}

// Runs one slot: the streams progress at their alpha-given speeds until all are done.
double run_slot(const SlotWork& w, const Slowdowns& a, std::map<std::string, double>& busy) {
  const char* names[3] = {"comm", "comp", "mem"};
  const std::vector<std::pair<std::string, double>>* ops[3] = {&w.comm, &w.comp, &w.mem};
  std::size_t head[3] = {0, 0, 0};
  double left[3];
  for (int i = 0; i < 3; ++i) left[i] = ops[i]->empty() ? 0 : ops[i]->front().second;
  auto active = [&](int i) { return head[i] < ops[i]->size(); };
  auto skip_empty = [&](int i) {  // zero-length operations take no time
    while (active(i) && left[i] <= 0) {
      ++head[i];
      if (active(i)) left[i] = (*ops[i])[head[i]].second;
    }
  };
  for (int i = 0; i < 3; ++i) skip_empty(i);
  double now = 0;
  while (active(0) || active(1) || active(2)) {
    double rate[3] = {0, 0, 0};
    for (int y = 0; y < 3; ++y) {
      if (!active(y)) continue;
      std::vector<int> others;
      for (int x = 0; x < 3; ++x)
        if (x != y && active(x)) others.push_back(x);
      const double f = others.empty() ? 1.0 : others.size() == 2 ? a.get(names[y], "all") : a.get(names[y], names[others[0]]);
      rate[y] = std::clamp(f, 1e-3, 1.0);
    }
    double dt = -1;
    for (int y = 0; y < 3; ++y)
      if (active(y) && (dt < 0 || left[y] / rate[y] < dt)) dt = left[y] / rate[y];
    now += dt;
    for (int y = 0; y < 3; ++y) {
      if (!active(y)) continue;
      busy[(*ops[y])[head[y]].first] += dt;
      left[y] -= rate[y] * dt;
      if (left[y] <= 1e-12 * std::max(1.0, (*ops[y])[head[y]].second)) {
        left[y] = 0;
        skip_empty(y);
      }
    }
  }
  return now;
}

PassPrediction evaluate(const std::vector<SlotWork>& slots, int parts, const Slowdowns& a) {
  PassPrediction out;
  for (const char* kind : {"S", "C", "R", "M"}) out.busy_ms[kind] = 0.0;
  for (int k = 0; k < int(slots.size()); ++k) {
    const SlotWork& w = slots[k];
    SlotPrediction s;
    s.phase = phase_of(k, parts);
    s.comm = total(w.comm);
    s.comp = total(w.comp);
    s.mem = total(w.mem);
    s.ms = run_slot(w, a, out.busy_ms);
    out.phase_ms[s.phase] += s.ms;
    out.ms += s.ms;
    out.slots.push_back(s);
  }
  return out;
}

// Appends `ms` of `kind` to a stream's work (nothing for zero).
void put(std::vector<std::pair<std::string, double>>& stream, const std::string& kind, double ms) {
  if (ms > 0) stream.emplace_back(kind, ms);
}

}  // namespace

PassPrediction predict_forward(int n, const PartTimes& t, const Slowdowns& a) {
  std::vector<SlotWork> slots(std::size_t(n) + 2);
  for (int k = 0; k <= n + 1; ++k) {
    SlotWork& w = slots[k];
    if (k >= 1 && k <= n) put(w.comp, "C", t.c);
    if (k - 1 >= 1) put(w.comm, "R", t.r);                 // R_{k-1}
    if (k + 1 <= n) put(w.comm, "S", t.s);                 // S_{k+1}
    if (k >= 1 && k <= n) put(w.mem, "M", t.m_rows);       // T_DI_k, after S_k
    if (k - 1 >= 1 && k - 1 <= n) put(w.mem, "M", t.m_middle);  // T_M_{k-1}, after C_{k-1}
  }
  return evaluate(slots, n, a);
}

PassPrediction predict_backward(int n, const PartTimes& t, const Slowdowns& a) {
  std::vector<SlotWork> slots(std::size_t(n) + 2);
  for (int k = 0; k <= n + 1; ++k) {
    SlotWork& w = slots[k];
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

PartTimes part_times_under(const std::string& strategy, const PartCosts& c) {
  if (strategy != "none" && strategy != "S1" && strategy != "S2" && strategy != "S3" && strategy != "S4")
    throw std::invalid_argument("memory-reuse strategy '" + strategy + "'; allowed: none, S1, S2, S3, S4");
  const bool offload_rows = strategy == "S1" || strategy == "S3", offload_middle = strategy == "S1" || strategy == "S2";
  PartTimes t;
  t.s = t.r = t.s_bwd = t.r_bwd = c.comm;
  t.c = c.comp_fwd;
  t.c_bwd = c.comp_bwd;
  if (offload_rows) t.m_rows = t.m_rows_bwd = c.mem_rows;
  if (offload_middle) t.m_middle = t.m_middle_bwd = c.mem_middle;
  if (strategy == "S2" || strategy == "S4") t.re_s = c.comm;
  if (strategy == "S3" || strategy == "S4") t.re_c = c.comp_middle;
  return t;
}

GranularityChoice choose_granularity(int n_min, int n_max, const std::vector<std::string>& strategies,
                                     const std::function<double(int, const std::string&)>& predicted_ms) {
  GranularityChoice best;
  bool first = true;
  for (int n = n_min; n <= n_max; ++n)
    for (const std::string& s : strategies) {
      const double ms = predicted_ms(n, s);
      if (first || ms < best.ms) {
        best = {n, s, ms};
        first = false;
      }
    }
  return best;
}

}  // namespace moebench
