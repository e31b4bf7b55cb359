#include "bench/pipe_bubble_csv.h"
#include <algorithm>
#include <cmath>
#include <cstdio>
#include "harness/spread.h"

namespace moebench {

namespace {
// A repetition's op times, flat in the table's order, per stage.
std::vector<std::vector<double>> split_by_stage(const PipelineSchedule& table, const std::vector<double>& all) {
  std::vector<std::vector<double>> per(table.stages);
  std::size_t i = 0;
  for (int s = 0; s < table.stages; ++s)
    for (std::size_t k = 0; k < table.steps[s].size(); ++k) per[s].push_back(all.at(i++));
  return per;
}
}  // namespace

void write_bubble_csv(const BenchContext& ctx, const PipeBubbleRecord& rec, const std::vector<RunRecord>& runs, int processors) {
  const int P = ctx.world.size();
  CsvTable t({"schedule", "stages", "micro_batches", "rows_per_micro_batch", "recompute", "stage", "f_ms", "b_ms", "w_ms",
              "send_ms", "busy_ms", "idle_ms", "step_ms", "step_ms_min", "step_ms_max", "step_ms_reps", "measured_bubble",
              "measured_bubble_min", "measured_bubble_max", "simulated_bubble", "simulated_step_ms",
              "measured_over_simulated_step", "simulator_status", "replayed_bubble", "replayed_step_ms",
              "measured_over_replayed_step", "simulator_processors", "closed_form_bubble", "tokens_per_s",
              "tokens_per_s_min", "tokens_per_s_max", "tokens_per_s_reps", "peak_activation_bytes",
              "grads_vs_one_micro_batch", "repetitions"});
  // By case name: the stages' mean measured bubble (share of the step) and idle ms -- the
  // bubble's size, what ZB-H1's "a third of 1F1B's" is about (a shorter step makes the same
  // idle time a larger share).
  std::map<std::string, double> mean_bubble, mean_idle_ms;
  std::map<std::string, StageOpTimes> stage0_times;
  for (const RunRecord& r : runs) {
    if (r.error || !rec.samples.count(r.name)) continue;
    const Case& c = rec.cases.at(r.name);
    const auto& reps = rec.samples.at(r.name);
    const Spread step = r.time_ms();
    std::vector<double> tokens_per_s;  // per repetition, in the order the rounds ran
    for (double ms : r.ms()) tokens_per_s.push_back(rec.mini / (ms / 1e3));
    auto field = [&](int stage, int f) {
      std::vector<double> v;
      for (const auto& rep : reps) v.push_back(rep[stage * kFields + f]);
      return spread_of(v);
    };
    std::vector<StageOpTimes> times;
    for (int s = 0; s < P; ++s)
      times.push_back({field(s, 2).median, field(s, 3).median, field(s, 4).median});
    // Where the backward is whole its measured time is B and W together: hand it over as b.
    std::vector<StageOpTimes> sim_times = times;
    if (c.kind != PipelineScheduleKind::zb_h1)
      for (auto& x : sim_times) x.w = 0;
    const auto table = make_pipeline_schedule(c.kind, P, c.micro_batches);
    const double send = rec.send_ms.at(c.micro_batches);
    const PipelineSimulation sim = simulate_pipeline(table, sim_times, send, false, processors);
    const double closed = ideal_bubble_fraction(P, c.micro_batches);
    const double ratio = step.median / sim.makespan;
    const bool ok = std::abs(ratio - 1) <= kSimulatorTarget;
    // Each repetition replayed with its own ops' durations, against its own step time.
    std::vector<double> replayed, over_replayed;
    std::vector<std::vector<double>> replayed_bubbles(P);
    const auto& op_reps = rec.op_ms.at(r.name);
    for (std::size_t i = 0; i < op_reps.size() && i < reps.size(); ++i) {
      const PipelineSimulation made = replay_pipeline(table, split_by_stage(table, op_reps[i]), send, processors);
      replayed.push_back(made.makespan);
      over_replayed.push_back(reps[i][1] / made.makespan);  // every stage holds the step time
      for (int s = 0; s < P; ++s) replayed_bubbles[s].push_back(made.bubble_fraction(s));
    }
    const Spread replay = spread_of(replayed), replay_ratio = spread_of(over_replayed);
    const int rows = rec.mini / c.micro_batches;
    const std::vector<double>& off = rec.grads_off.at(r.name);  // -1: the reference had not run
    const std::string grads_off = off.empty() || std::find(off.begin(), off.end(), -1.0) != off.end()
                                      ? "-"
                                      : fmt(*std::max_element(off.begin(), off.end()), 3);
    double bubble_sum = 0, idle_sum = 0;
    for (int s = 0; s < P; ++s) {
      std::vector<double> bubbles;
      for (const auto& rep : reps) bubbles.push_back(1 - rep[s * kFields] / rep[s * kFields + 1]);
      const Spread b = spread_of(bubbles);
      bubble_sum += b.median;
      std::vector<double> idles;
      for (const auto& rep : reps) idles.push_back(rep[s * kFields + 1] - rep[s * kFields]);
      const double idle = spread_of(idles).median;
      idle_sum += idle;
      t.add_row({schedule_name(c.kind), std::to_string(P), std::to_string(c.micro_batches), std::to_string(rows),
                 c.recompute ? "yes" : "no", std::to_string(s), fmt(times[s].f), fmt(times[s].b),
                 c.kind == PipelineScheduleKind::zb_h1 ? fmt(times[s].w) : "in b", fmt(send), fmt(field(s, 0).median),
                 fmt(idle),
                 fmt(step.median), fmt(step.min), fmt(step.max), repetitions_cell(r.ms()), fmt(b.median, 4),
                 fmt(b.min, 4), fmt(b.max, 4),
                 fmt(sim.bubble_fraction(s), 4), fmt(sim.makespan), fmt(ratio, 4),
                 std::string(ok ? "within " : "NOT within ") + fmt(kSimulatorTarget * 100, 2) + "%",
                 fmt(spread_of(replayed_bubbles[s]).median, 4), fmt(replay.median), fmt(replay_ratio.median, 4),
                 processors > 0 ? std::to_string(processors) + " cores shared by the stages" : "one per stage",
                 fmt(closed, 4),
                 fmt(rec.mini / (step.median / 1e3)), fmt(rec.mini / (step.max / 1e3)), fmt(rec.mini / (step.min / 1e3)),
                 repetitions_cell(tokens_per_s), fmt(field(s, 5).max, 10),
                 grads_off, std::to_string(step.samples)});
    }
    mean_bubble[r.name] = bubble_sum / P;
    mean_idle_ms[r.name] = idle_sum / P;
    stage0_times[r.name] = times[0];
    std::printf("%-34s step %8.2f ms  bubble %.3f (simulated %.3f, (P-1)/(M+P-1) %.3f)  step / simulated %.3f (%s)"
                "  step / replayed %.3f\n",
                r.name.c_str(), step.median, bubble_sum / P, sim.bubble_fraction(), closed, ratio,
                ok ? "within 5%" : "NOT within 5%", replay_ratio.median);
  }
  // ZB-H1 against 1F1B: measured at this P, and at P = 4, M = 8 by the simulator fed with
  // this run's op times (stage 0's, for every stage).
  for (int M : rec.micro) {
    const std::string zb = Case{PipelineScheduleKind::zb_h1, M, false}.name(), ofob = Case{PipelineScheduleKind::one_f_one_b, M, false}.name();
    if (!mean_idle_ms.count(zb) || !mean_idle_ms.count(ofob) || mean_idle_ms[ofob] <= 0) continue;
    const double r = mean_idle_ms[zb] / mean_idle_ms[ofob];
    std::printf("zb-h1 / 1f1b idle time per stage, P=%d M=%d: measured %.3f (target <= %.1f: %s; ZB-H1's claim 1/3); "
                "as shares of their steps %.3f\n",
                P, M, r, kZeroBubbleTarget, r <= kZeroBubbleTarget ? "met" : "NOT met", mean_bubble[zb] / mean_bubble[ofob]);
    if (M == 8 && P != 4) {
      const StageOpTimes zt = stage0_times[zb], ot = stage0_times[ofob];
      const auto z4 = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::zb_h1, 4, 8), {zt}, rec.send_ms.at(M));
      const auto o4 = simulate_pipeline(make_pipeline_schedule(PipelineScheduleKind::one_f_one_b, 4, 8), {{ot.f, ot.b, 0}},
                                        rec.send_ms.at(M));
      double z_idle = 0, o_idle = 0;
      for (int s = 0; s < 4; ++s) z_idle += z4.idle(s), o_idle += o4.idle(s);
      const double r4 = z_idle / o_idle;
      std::printf("zb-h1 / 1f1b idle time per stage, P=4 M=8, simulated from these op times: %.3f (target <= %.1f: %s); "
                  "as shares of their steps %.3f\n",
                  r4, kZeroBubbleTarget, r4 <= kZeroBubbleTarget ? "met" : "NOT met",
                  z4.bubble_fraction() / o4.bubble_fraction());
    }
  }
  t.write(ctx.opts.out_dir + "/pipe/bubble.csv", ctx.provenance);
}

}  // namespace moebench
