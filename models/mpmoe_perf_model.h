// MPMoE's performance model (003 Sec. 4.2, Fig. 8): the time of the pipelined layer for a
// granularity n and a memory-reuse strategy S, from the time each operation takes alone (from
// the piecewise-linear speed fits) and the slowdown factors alpha(y, x) of operations running
// side by side (Sec. 2.3, Fig. 3).
//
// Three streams: comm (the dispatch S and combine R all-to-alls share the wire), comp (the
// experts C, and S3/S4's recomputation) and mem (M: offloads in forward, prefetches in
// backward). A pass over n parts runs in n + 2 slots; in slot k the comp stream runs part k
// and the comm stream the parts beside it, as the layer issues them:
//   forward   slot k: C_k | R_{k-1} + S_{k+1} | M(T_DI_k) + M(T_M_{k-1})
//   backward  slot k: C'_k (+ recompute_k) | S'_{k-1} + R'_{k+1} (+ re-S_{k+1}) | M'_{k+1}
// (slot 0: S_1 alone, or R'_1 with re-S_1 and M'_1; slot n+1: R_n, or S'_n). Slot 0 is the
// paper's P0 (initial), slot 1 P1 (saturating), the middle slots P2 (saturated), slot n P3
// (melting), slot n+1 P4 (final). Paradigm 1 has no M (no reuse, S4); paradigm 2 is forward
// with M depending on S and C (S1-S3); paradigm 3 backward with C depending on M (S1-S3).
// Inside a slot each stream runs its work in order at the speed alpha(stream, x) allows, x the
// other streams still busy ("all" when both are, full speed alone; alpha taken at most 1): when
// a stream finishes, the others speed up. When the streams end together this is the paper's
// formula, e.g. P2 of paradigm 1: max((t_S + t_R) / alpha(comm, comp), t_C / alpha(comp, comm));
// when one is much shorter (a small copy beside a long GEMM) it does not slow the other for the
// whole slot, as the formula would have it. Beyond the paper, the model reports each
// operation's predicted busy time (S, C, R, M), so a measurement can be held against it
// operation by operation and not only end to end.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace moebench {

// alpha(y, x) for y in {comm, comp, mem}, x in {comm, comp, mem, all}; 1 where not given.
struct Slowdowns {
  std::map<std::pair<std::string, std::string>, double> alpha;
  double get(const std::string& y, const std::string& x) const;
};

// One part's operations, each alone, in milliseconds.
struct PartTimes {
  double s = 0, c = 0, r = 0;                    // forward: dispatch a2a, experts, combine a2a
  double m_rows = 0, m_middle = 0;               // forward offloads (S1/S3: T_DI; S1/S2: T_M)
  double s_bwd = 0, c_bwd = 0, r_bwd = 0;        // backward: S', experts' backward, R'
  double re_s = 0, re_c = 0;                     // S2/S4: T_DI re-communicated; S3/S4: T_M recomputed
  double m_rows_bwd = 0, m_middle_bwd = 0;       // S1-S3 prefetches
};

struct SlotPrediction {
  std::string phase;  // P0 .. P4
  double comm = 0, comp = 0, mem = 0;  // work alone (ms)
  double ms = 0;                       // the slot, slowdowns applied
};

struct PassPrediction {
  std::vector<SlotPrediction> slots;
  double ms = 0;
  // Predicted busy time per operation kind, slowdowns applied: "S", "C", "R", "M".
  std::map<std::string, double> busy_ms;
  // The paper's five phases, summed over slots of the same phase.
  std::map<std::string, double> phase_ms;
};

// Each kind of operation of one part, alone, for the part's sizes (ms); the strategy decides which
// of them the part runs (part_times_under).
struct PartCosts {
  double comm = 0;                  // one all-to-all of the part's rows: S, R, their backward, a re-send
  double comp_fwd = 0, comp_bwd = 0;  // the experts' forward and backward
  double comp_middle = 0;           // T_M recomputed (one GEMM)
  double mem_rows = 0, mem_middle = 0;  // T_DI and T_M copied between the device and pinned host memory
};

// One part's operations under `strategy` ("none", "S1" .. "S4"), 003 Table 2: S1 offloads T_DI
// and T_M, S2 re-sends T_DI and offloads T_M, S3 offloads T_DI and recomputes T_M, S4 re-sends
// and recomputes; none keeps both. Throws std::invalid_argument for another name.
PartTimes part_times_under(const std::string& strategy, const PartCosts& c);

// MPMoE-pm's choice (Sec. 4.2): the (n, strategy) of least predicted time, n from n_min to n_max
// (outer) and `strategies` in their order (inner), the first of equal times kept.
struct GranularityChoice {
  int parts = 1;
  std::string strategy = "none";
  double ms = 0;
};
GranularityChoice choose_granularity(int n_min, int n_max, const std::vector<std::string>& strategies,
                                     const std::function<double(int parts, const std::string& strategy)>& predicted_ms);

// Which paradigm a pass of strategy `strategy` ("none", "S1" .. "S4") follows: 1, 2 or 3.
int paradigm(const std::string& strategy, bool backward);

PassPrediction predict_forward(int parts, const PartTimes& t, const Slowdowns& a);
PassPrediction predict_backward(int parts, const PartTimes& t, const Slowdowns& a);

}  // namespace moebench
