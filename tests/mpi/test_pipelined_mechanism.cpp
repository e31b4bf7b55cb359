// How the pipelined MoE layer computes, read from the runtime's own records at whatever world
// size mpirun gives (CTest: 1, 2 and 4 ranks); every strategy's outputs and gradients already
// equal the plain layer's (test_pipelined_layer.cpp), so a strategy that turns into its
// neighbour is caught here only:
//  - MPMoE's S1-S4 (003 Table 2) restore T_DI and T_M in backward exactly as the table says --
//    offloaded (copies on the copy stream inside moe.offload, brought back inside moe.restore),
//    re-communicated (moe.a2a.redispatch, moving the bytes of the part's own dispatch) or
//    recomputed (moe.recompute, GEMMs producing the part's [rows, f]) -- and nothing else is;
//  - on an emulated link the dispatch of part i+1 starts while the experts of part i compute;
//  - the FasterMoE-style split sends to group (mine + k) mod m and receives from (mine - k)
//    mod m at step k, and to no other rank;
//  - the bench's paired rounds run one iteration of each compared configuration per round, in
//    an order rotated each round, not each configuration's iterations back to back.
#include <gtest/gtest.h>
#include <algorithm>
#include "harness/layer_runner.h"
#include "moe/pipelined_layer.h"
#include "moe_test_util.h"
#include "comm/comm.h"
#include "timeline_util.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

struct Streams {
  explicit Streams(Device& dev)
      : s{dev.create_stream("compute"), dev.create_stream("dispatch"), dev.create_stream("combine"), dev.create_stream("copy")} {}
  PipelineStreams s;
};

// One forward and backward of `pipe`, recorded; the rows each part dispatched to this rank's experts.
struct LayerRun {
  std::vector<TimelineEntry> timeline;
  std::vector<std::size_t> rows;  // per part
};

LayerRun run(const MoEConfig& cfg, const PipelineConfig& pipe, Communicator& world, int tokens_per_rank) {
  Device dev = Device::open(Backend::cpu);
  Streams st(dev);
  auto dispatch = world.dup(), combine = world.dup();
  TrackingAllocator alloc(Backend::cpu);
  PipelinedMoELayer layer(cfg, pipe, dev, alloc, *dispatch, *combine);
  layer.init(7, st.s.compute);
  const auto x = tokens(tokens_per_rank, cfg.hidden, 100, world.rank() * tokens_per_rank);
  const auto dy = tokens(tokens_per_rank, cfg.hidden, 200, world.rank() * tokens_per_rank);
  std::vector<float> y(x.size()), dx(x.size());
  LayerRun r;
  RecordedTimeline recording(world.rank());
  PipelinedContext c = layer.forward(x.data(), tokens_per_rank, y.data(), st.s);
  for (const auto& p : c.parts) {
    std::size_t rows = 0;
    for (int n : p.dispatch->rows_per_expert) rows += std::size_t(n);
    r.rows.push_back(rows);
  }
  layer.backward(c, dy.data(), dx.data(), st.s);
  dev.synchronize();
  r.timeline = recording.entries();
  return r;
}

std::vector<double> copy_bytes(const LayerRun& r, const std::string& range) {
  std::vector<double> out;
  for (const TimelineEntry& e : ranges_named(r.timeline, range))
    for (const TimelineEntry& c : ops_inside(r.timeline, e, "copy")) out.push_back(number_arg(c, "bytes"));
  std::sort(out.begin(), out.end());
  return out;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

class PipelinedMechanism : public test_backend::WorldTest<test_backend::WorldOf::mpi> {};

}  // namespace

TEST_F(PipelinedMechanism, EachStrategyRestoresExactlyWhatTableTwoSays) {
  const MoEConfig cfg = multi_rank_test_config();
  ASSERT_NE(cfg.hidden, cfg.ffn) << "T_DI and T_M are told apart by their widths";
  const int n = 3, T = 13;
  const double es = 4;  // fp32
  for (MemoryReuse reuse : {MemoryReuse::none, MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4}) {
    PipelineConfig pipe;
    pipe.partitions = n;
    pipe.reuse = reuse;
    const std::string what = pipe.describe();
    const bool reuses = reuse != MemoryReuse::none;
    // Table 2: T_DI offloaded by S1 and S3, re-communicated by S2 and S4; T_M offloaded by S1
    // and S2, recomputed by S3 and S4.
    const bool offload_di = reuse == MemoryReuse::s1 || reuse == MemoryReuse::s3;
    const bool resend_di = reuse == MemoryReuse::s2 || reuse == MemoryReuse::s4;
    const bool offload_m = reuse == MemoryReuse::s1 || reuse == MemoryReuse::s2;
    const bool recompute_m = reuse == MemoryReuse::s3 || reuse == MemoryReuse::s4;
    const LayerRun r = run(cfg, pipe, *world, T);
    ASSERT_EQ(r.rows.size(), std::size_t(n));

    std::vector<double> offloaded;  // what Table 2 names, per part with rows
    for (std::size_t rows : r.rows) {
      if (rows == 0) continue;
      if (offload_di) offloaded.push_back(double(rows) * cfg.hidden * es);
      if (offload_m) offloaded.push_back(double(rows) * cfg.ffn * es);
    }
    std::sort(offloaded.begin(), offloaded.end());
    EXPECT_EQ(copy_bytes(r, "moe.offload"), offloaded)
        << what << ": offloaded other tensors than Table 2's (bytes per copy; T_DI is rows x " << cfg.hidden
        << ", T_M rows x " << cfg.ffn << ")" << (resend_di ? ": T_DI must be re-sent, not offloaded" : "")
        << (recompute_m ? ": T_M must be recomputed, not offloaded" : "");
    EXPECT_EQ(copy_bytes(r, "moe.restore"), offloaded) << what << ": brought back other tensors than it offloaded";

    const auto resent = ranges_named(r.timeline, "moe.a2a.redispatch");
    const auto dispatched = ranges_named(r.timeline, "moe.a2a.dispatch");
    ASSERT_EQ(dispatched.size(), std::size_t(n)) << what;
    EXPECT_EQ(resent.size(), resend_di ? std::size_t(n) : 0u)
        << what << (resend_di ? ": T_DI was not re-communicated" : ": re-communicated T_DI, which Table 2 does not");
    for (std::size_t i = 0; i < std::min<std::size_t>(resent.size(), n); ++i) {
      const auto again = ops_inside(r.timeline, resent[i], "all_to_all_v (mpi)");
      const auto first = ops_inside(r.timeline, dispatched[i], "all_to_all_v (mpi)");
      ASSERT_EQ(again.size(), 1u) << what << ": part " << i << "'s redispatch";
      ASSERT_EQ(first.size(), 1u) << what << ": part " << i << "'s dispatch";
      EXPECT_EQ(list_arg(again[0], "send_bytes"), list_arg(first[0], "send_bytes")) << what << ": part " << i;
      EXPECT_EQ(list_arg(again[0], "recv_bytes"), list_arg(first[0], "recv_bytes")) << what << ": part " << i;
      EXPECT_EQ(sum(list_arg(again[0], "recv_bytes")), double(r.rows[i]) * cfg.hidden * es)
          << what << ": part " << i << " re-received other bytes than its T_DI";
    }

    const auto recomputed = ranges_named(r.timeline, "moe.recompute");
    EXPECT_EQ(recomputed.size(), recompute_m ? std::size_t(n) : 0u)
        << what << (recompute_m ? ": T_M was not recomputed" : ": recomputed T_M, which Table 2 does not");
    for (std::size_t i = 0; i < std::min<std::size_t>(recomputed.size(), n); ++i) {
      double rows = 0;  // T_M's rows: GEMMs of width f over the hidden dimension
      for (const TimelineEntry& g : ops_inside(r.timeline, recomputed[i], "gemm"))
        if (number_arg(g, "n") == cfg.ffn && number_arg(g, "k") == cfg.hidden) rows += number_arg(g, "m");
      EXPECT_EQ(rows, double(r.rows[i])) << what << ": part " << i << "'s recomputation is not its T_M";
    }
    // Without reuse, nothing is moved to or from the host at all.
    if (!reuses) {
      EXPECT_TRUE(copy_bytes(r, "moe.offload").empty() && copy_bytes(r, "moe.restore").empty()) << what;
    }
  }
}

// MPMoE's point (Fig. 4b): S of part i+1 runs while C of part i computes. On an emulated link
// of 3 ms per operation, each dispatch takes two operations (counts, rows) and each part's experts
// several milliseconds here, so a dispatch that waits for the experts before it starts shows.
// The host enqueues S(i+1) just after C(i): on a loaded machine (4 ranks and their workers on 2
// cores) it may be descheduled for as long as C(i) takes, so each part needs the overlap in one
// of three forwards; a dispatch that waits for the experts never has it.
TEST_F(PipelinedMechanism, TheDispatchOfTheNextPartOverlapsTheExperts) {
  EmulatedLink link;
  link.bandwidth_GBps = 1;
  link.latency_us = 3000;
  auto linked = make_mpi_communicator(link);
  MoEConfig cfg;
  cfg.hidden = 512;
  cfg.ffn = 4096;
  cfg.experts = 8;
  cfg.top_k = 1;
  cfg.aux_loss = false;
  const int n = 4;
  PipelineConfig pipe;
  pipe.partitions = n;
  std::vector<double> best(n - 1, 1e300);  // per part: S(i+1)'s start minus C(i)'s end, the least seen
  for (int attempt = 0; attempt < 3; ++attempt) {
    const LayerRun r = run(cfg, pipe, *linked, 256);
    const auto experts = ranges_named(r.timeline, "moe.expert");
    const auto dispatches = ranges_named(r.timeline, "moe.a2a.dispatch");
    ASSERT_EQ(experts.size(), std::size_t(n));
    ASSERT_EQ(dispatches.size(), std::size_t(n));
    for (int i = 0; i + 1 < n; ++i) best[i] = std::min(best[i], dispatches[i + 1].start_us - experts[i].end_us);
  }
  for (int i = 0; i + 1 < n; ++i)
    EXPECT_LT(best[i], 0) << "the dispatch of part " << i + 1 << " began " << best[i] << " us after the experts of part "
                          << i << " ended, in each of three forwards: overlap lost";
}

// 003 Sec. 2 (FasterMoE): W / g groups of g ranks; at step k a rank sends to group (mine + k) mod
// m -- the experts it holds -- and receives from group (mine - k) mod m.
TEST_F(PipelinedMechanism, FasterMoEStyleExchangesWithTheGroupsInTheScheduleOrder) {
  const int W = world->size();
  if (W < 2) GTEST_SKIP() << "one rank is one group";
  MoEConfig cfg = multi_rank_test_config();
  cfg.capacity_factor.reset();
  for (int g = 1; g < W; ++g) {
    if (W % g) continue;
    const int m = W / g, mine = world->rank() / g;
    PipelineConfig pipe;
    pipe.split = PipelineSplit::worker_groups;
    pipe.group_size = g;
    const LayerRun r = run(cfg, pipe, *world, 64);
    const auto steps = ranges_named(r.timeline, "moe.a2a.dispatch");
    ASSERT_EQ(steps.size(), std::size_t(m)) << pipe.describe();
    for (int k = 0; k < m; ++k) {
      const auto ops = ops_inside(r.timeline, steps[k], "all_to_all_v (mpi)");
      ASSERT_EQ(ops.size(), 1u) << pipe.describe() << " step " << k;
      const auto sent = list_arg(ops[0], "send_bytes"), received = list_arg(ops[0], "recv_bytes");
      ASSERT_EQ(sent.size(), std::size_t(W));
      double total = 0;
      for (int p = 0; p < W; ++p) {
        total += sent[p];
        if (sent[p] > 0) {
          EXPECT_EQ(p / g, (mine + k) % m) << pipe.describe() << ": step " << k << " sent to rank " << p << " of group "
                                           << p / g << ", the schedule says group " << (mine + k) % m;
        }
        if (received[p] > 0) {
          EXPECT_EQ(p / g, (mine - k + m) % m) << pipe.describe() << ": step " << k << " received from rank " << p
                                               << ", the schedule says group " << (mine - k + m) % m;
        }
      }
      EXPECT_GT(total, 0) << pipe.describe() << ": step " << k << " sent nothing: the case shows no order";
    }
  }
}

// LayerRunner::run_paired (moebench_mpmoe's f10, f13, f15, f16): read from the timeline, the
// configurations (n = 1, 2, 4 parts: as many forward dispatches per iteration) ran one warm-up
// each, then round by round, each round starting one configuration later.
TEST_F(PipelinedMechanism, PairedRoundsRunOneIterationOfEachConfigurationPerRound) {
  const MoEConfig cfg = multi_rank_test_config();
  Device dev = Device::open(Backend::cpu);
  Streams st(dev);
  auto dispatch = world->dup(), combine = world->dup();
  LayerRunner runner(MeasureEnv{*Runtime::current(), dev, *world}, LayerShape{"custom", cfg}, 64, st.s, *dispatch, *combine);
  std::vector<PairedConfig> configs;
  for (int parts : {1, 2, 4}) {
    PairedConfig c;
    c.pipe.partitions = parts;
    configs.push_back(c);
  }
  RecordedTimeline recording(world->rank());
  const std::vector<RunResult> results = runner.run_paired(configs, 1, 3);
  dev.synchronize();
  const auto timeline = recording.entries();
  ASSERT_EQ(results.size(), 3u);
  for (const RunResult& r : results) EXPECT_EQ(r.ms.size(), 3u) << "one timed iteration per round";
  // Parts per iteration, in the order the iterations ran: each starts at its gating.
  std::vector<int> parts;
  const auto gatings = ranges_named(timeline, "moe.gating");
  for (std::size_t i = 0; i < gatings.size(); ++i) {
    int count = 0;
    for (const TimelineEntry& d : ranges_named(timeline, "moe.a2a.dispatch"))
      count += d.start_us >= gatings[i].start_us && (i + 1 == gatings.size() || d.start_us < gatings[i + 1].start_us);
    parts.push_back(count);
  }
  EXPECT_EQ(parts, (std::vector<int>{1, 2, 4, /* rounds: */ 1, 2, 4, 2, 4, 1, 4, 1, 2}))
      << "warm-ups, then rounds: not interleaved, or the order not rotated";
}

}  // namespace moebench
