// Every MoE CUDA op against its CPU reference, and the whole layer on the GPU against the
// CPU layer. Skipped where there is no GPU.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include "gpu/gpu_test_util.h"
#include "comm/comm.h"
#include "runtime/watchdog.h"
#include "runtime/runtime.h"
#include "kernels/aux_loss.h"
#include "kernels/axpy.h"
#include "kernels/capacity.h"
#include "kernels/bf16_split.h"
#include "kernels/gate_grads.h"
#include "kernels/gating.h"
#include "kernels/grouped_gemm.h"
#include "kernels/permute.h"
#include "moe/moe_layer.h"
#include "moe_test_util.h"

namespace moebench {
using namespace gputest;

TEST(GpuGating, SoftmaxTopkMatchesCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  // Up to 256 experts a prototype a warp takes a row, its values in 1, 2, 4 or 8 registers a lane
  // (rows not a multiple of 32 wide among them); wider rows take a block. The last shape's 16384
  // experts per prototype need 64 KiB of shared memory: the opt-in path.
  for (GateShape g : {GateShape{64, 64, 1, 1}, GateShape{64, 64, 1, 4}, GateShape{64, 64, 4, 4}, GateShape{33, 20, 1, 3},
                      GateShape{50, 100, 1, 3}, GateShape{19, 256, 1, 8}, GateShape{19, 257, 1, 8},
                      GateShape{8, 4096, 1, 16}, GateShape{8, 4096, 4, 4}, GateShape{6, 16384, 1, 4}}) {
    const std::size_t te = std::size_t(g.tokens) * g.experts, ts = std::size_t(g.tokens) * g.slots();
    const auto logits = random_rounded(te, DType::f32, 3, 2.f);
    std::vector<float> probs(te), weight(ts);
    std::vector<std::int32_t> expert(ts);
    softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
    Buffer dl = to_device(dev, alloc, logits), dp = alloc.allocate(te * 4, MemTag::temporary),
           de = alloc.allocate(ts * 4, MemTag::temporary), dw = alloc.allocate(ts * 4, MemTag::temporary);
    softmax_topk(dev.exec(dev.default_stream()), g, dl.as<float>(), dp.as<float>(), de.as<std::int32_t>(), dw.as<float>());
    EXPECT_LT(rel_l2(to_host<float>(dev, dp, te), probs), 1e-5) << "E=" << g.experts << " Z=" << g.prototypes;
    EXPECT_EQ(to_host<std::int32_t>(dev, de, ts), expert) << "E=" << g.experts << " Z=" << g.prototypes << " k=" << g.k;
    EXPECT_LT(rel_l2(to_host<float>(dev, dw, ts), weight), 1e-5);

    // The backward from the slots' gradients to the logits' in one pass (no aux loss here).
    const auto dweight = random_rounded(ts, DType::f32, 5);
    GateGradArgs a{g, 1, expert.data(), dweight.data(), probs.data()};
    std::vector<float> dlogits(te);
    gate_logit_grads_cpu(a, Bf16Parts{}, dlogits.data());
    Buffer ddw = to_device(dev, alloc, dweight), ddl = to_device(dev, alloc, std::vector<float>(te, NAN));
    a.expert = de.as<std::int32_t>(), a.dweight = ddw.as<float>(), a.probs = dp.as<float>();
    gate_logit_grads(dev.exec(dev.default_stream()), a, Bf16Parts{}, ddl.data());
    EXPECT_LT(rel_l2(to_host<float>(dev, ddl, te), dlogits), 1e-5) << "E=" << g.experts << " Z=" << g.prototypes;
  }
}

// From the three slices of the bf16 gate's GEMM: the logits summed bit for bit as sum_split3
// sums them, the same experts and probabilities as the CPU's sum then softmax, in one kernel.
TEST(GpuGating, SoftmaxTopkFromSlicesMatchesTheSumThenSoftmax) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (GateShape g : {GateShape{64, 64, 1, 1}, GateShape{37, 64, 4, 2}, GateShape{21, 200, 1, 5}, GateShape{8, 4096, 1, 16}}) {
    const std::size_t te = std::size_t(g.tokens) * g.experts, ts = std::size_t(g.tokens) * g.slots();
    const auto slices = random_rounded(3 * te, DType::f32, 6, 2.f);
    std::vector<float> logits(te), probs(te), weight(ts);
    std::vector<std::int32_t> expert(ts);
    sum_split3_cpu(slices.data(), std::size_t(g.tokens), g.experts, logits.data());
    softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
    Buffer dsl = to_device(dev, alloc, slices), dl = to_device(dev, alloc, std::vector<float>(te, NAN)),
           dp = alloc.allocate(te * 4, MemTag::temporary), de = alloc.allocate(ts * 4, MemTag::temporary),
           dw = alloc.allocate(ts * 4, MemTag::temporary);
    softmax_topk_from_slices(dev.exec(dev.default_stream()), g, dsl.as<float>(), dl.as<float>(), dp.as<float>(),
                             de.as<std::int32_t>(), dw.as<float>());
    EXPECT_EQ(to_host<float>(dev, dl, te), logits) << "E=" << g.experts << " Z=" << g.prototypes;
    EXPECT_LT(rel_l2(to_host<float>(dev, dp, te), probs), 1e-5);
    EXPECT_EQ(to_host<std::int32_t>(dev, de, ts), expert) << "E=" << g.experts << " Z=" << g.prototypes << " k=" << g.k;
    EXPECT_LT(rel_l2(to_host<float>(dev, dw, ts), weight), 1e-5);
  }
}

TEST(GpuCapacity, PositionsCountsAndRowMapMatchCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (int capacity : {-1, 3, 40}) {
    CapacityShape c{GateShape{256, 32, 2, 2}, 4, capacity};
    const std::size_t ts = 256 * 4, ge = 4 * 32;
    std::vector<std::int32_t> expert(ts);
    const auto r = random_rounded(ts, DType::f32, 6);
    for (int t = 0; t < 256; ++t)
      for (int z = 0; z < 2; ++z) {
        const int a = int(std::fabs(r[t * 4 + z * 2]) * 7) % 16, b = (a + 1 + int(std::fabs(r[t * 4 + z * 2 + 1]) * 5) % 15) % 16;
        expert[t * 4 + z * 2] = z * 16 + a;
        expert[t * 4 + z * 2 + 1] = z * 16 + b;  // distinct within the prototype
      }
    std::vector<std::int32_t> pos(ts), routed(ge), kept(ge);
    assign_positions_cpu(c, expert.data(), pos.data(), routed.data(), kept.data());
    Buffer de = to_device(dev, alloc, expert), dpos = alloc.allocate(ts * 4, MemTag::temporary),
           dr = alloc.allocate(ge * 4, MemTag::temporary), dk = alloc.allocate(ge * 4, MemTag::temporary);
    const Exec ex = dev.exec(dev.default_stream());
    Buffer ws = alloc.allocate(std::max<std::size_t>(assign_positions_workspace_bytes(ex, c), 1), MemTag::buffers);
    assign_positions(ex, c, de.as<std::int32_t>(), dpos.as<std::int32_t>(), dr.as<std::int32_t>(), dk.as<std::int32_t>(),
                     ws.data(), ws.bytes());
    EXPECT_EQ(to_host<std::int32_t>(dev, dpos, ts), pos) << "capacity " << capacity;
    EXPECT_EQ(to_host<std::int32_t>(dev, dr, ge), routed);
    EXPECT_EQ(to_host<std::int32_t>(dev, dk, ge), kept);

    std::vector<std::int32_t> base(ge);
    for (std::size_t i = 0; i < ge; ++i) base[i] = (i % 3 == 0) ? -1 : std::int32_t(i * 10);
    std::vector<std::int32_t> row_of(ts);
    RowMapSource src{256, 4, 32, 4, expert.data(), pos.data(), base.data()};
    build_row_map_cpu(src, row_of.data());
    Buffer db = to_device(dev, alloc, base), drow = alloc.allocate(ts * 4, MemTag::temporary);
    RowMapSource dsrc{256, 4, 32, 4, de.as<std::int32_t>(), dpos.as<std::int32_t>(), db.as<std::int32_t>()};
    build_row_map(ex, dsrc, drow.as<std::int32_t>());
    EXPECT_EQ(to_host<std::int32_t>(dev, drow, ts), row_of);
  }
}

// The parallel counting sort against the CPU order at paper-like sizes: many tiles per
// (group, prototype), choices spread unevenly, capacities from dropping most to dropless.
TEST(GpuCapacity, ParallelPositionsMatchCpuAtLargeTokenAndExpertCounts) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (const CapacityShape& base : {CapacityShape{GateShape{16384, 1024, 2, 4}, 2, -1},
                                    CapacityShape{GateShape{32768, 4096, 1, 1}, 1, -1},
                                    CapacityShape{GateShape{4097, 64, 1, 16}, 1, -1},
                                    CapacityShape{GateShape{8192, 64, 1, 1}, 1, -1},       // the layer: 128 tiles of 64
                                    CapacityShape{GateShape{200003, 16, 1, 1}, 1, -1}}) {  // tiles of 1024, a ragged last scan chunk
    const GateShape& g = base.gate;
    const int F = g.per_prototype(), S = g.slots();
    const std::size_t ts = std::size_t(g.tokens) * S, ge = std::size_t(base.groups) * g.experts;
    std::vector<std::int32_t> expert(ts);
    std::mt19937 rng(17);
    for (int t = 0; t < g.tokens; ++t)
      for (int z = 0; z < g.prototypes; ++z) {
        // k distinct experts of the prototype, skewed towards low indices (unbalanced, as real routing)
        std::vector<int> chosen;
        while (int(chosen.size()) < g.k) {
          const int e = int(std::pow(std::uniform_real_distribution<double>(0, 1)(rng), 2.0) * F) % F;
          if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (int j = 0; j < g.k; ++j) expert[std::size_t(t) * S + z * g.k + j] = z * F + chosen[j];
      }
    Buffer de = to_device(dev, alloc, expert);
    for (int capacity : {-1, 1, 7, 40}) {
      CapacityShape c = base;
      c.capacity = capacity;
      std::vector<std::int32_t> pos(ts), routed(ge), kept(ge);
      assign_positions_cpu(c, expert.data(), pos.data(), routed.data(), kept.data());
      const Exec ex = dev.exec(dev.default_stream());
      Buffer ws = alloc.allocate(std::max<std::size_t>(assign_positions_workspace_bytes(ex, c), 1), MemTag::buffers);
      Buffer dpos = alloc.allocate(ts * 4, MemTag::temporary), dr = alloc.allocate(ge * 4, MemTag::temporary),
             dk = alloc.allocate(ge * 4, MemTag::temporary);
      assign_positions(ex, c, de.as<std::int32_t>(), dpos.as<std::int32_t>(), dr.as<std::int32_t>(), dk.as<std::int32_t>(),
                       ws.data(), ws.bytes());
      EXPECT_EQ(to_host<std::int32_t>(dev, dpos, ts), pos) << "T=" << g.tokens << " E=" << g.experts << " capacity " << capacity;
      EXPECT_EQ(to_host<std::int32_t>(dev, dr, ge), routed);
      EXPECT_EQ(to_host<std::int32_t>(dev, dk, ge), kept);
    }
  }
}

// Rows of 72 values move four at a time; rows of 70, one at a time.
TEST(GpuPermute, DispatchCombineAndBackwardMatchCpuInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  for (int h : {72, 70}) {
    SCOPED_TRACE("hidden " + std::to_string(h));
    const int T = 50, S = 3, R = 120;
    std::vector<std::int32_t> row_of(T * S);
    for (int i = 0; i < T * S; ++i) row_of[i] = (i % 5 == 4) ? -1 : (i * 37) % 150 < R ? (i * 37) % 150 : -1;
    // make rows unique: keep the first slot that names a row
    std::vector<bool> used(R, false);
    for (auto& r : row_of)
      if (r >= 0) { if (used[r]) r = -1; else used[r] = true; }
    Buffer drow = to_device(dev, alloc, row_of);
    const RowMap hm{T, S, h, row_of.data()}, dm{T, S, h, drow.as<std::int32_t>()};
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      const double tol = 4 * dtype_epsilon(t) + 1e-6;
      const auto x = random_rounded(std::size_t(T) * h, t, 7);
      const auto rows_in = random_rounded(std::size_t(R) * h, t, 8);
      const auto weight = random_rounded(std::size_t(T) * S, DType::f32, 9);
      const auto dout = random_rounded(std::size_t(T) * h, t, 10);
      std::vector<float> rows = rows_in, y(std::size_t(T) * h), drows(std::size_t(R) * h, 0.f), dweight(T * S),
                         dx(std::size_t(T) * h);
      dispatch_rows_cpu(hm, x.data(), rows.data());
      Buffer dxv = upload(dev, alloc, x, t), drv = upload(dev, alloc, rows_in, t), dw = to_device(dev, alloc, weight);
      const Exec ex = dev.exec(dev.default_stream());
      dispatch_rows(ex, dm, dxv.data(), drv.data(), t);
      EXPECT_EQ(download(dev, alloc, drv, rows.size(), t), rows) << dtype_name(t);  // copies are exact

      combine_rows_cpu(hm, rows.data(), weight.data(), y.data());
      Buffer dy = upload(dev, alloc, std::vector<float>(y.size(), NAN), t);
      combine_rows(ex, dm, drv.data(), dw.as<float>(), dy.data(), t);
      EXPECT_LT(rel_l2(download(dev, alloc, dy, y.size(), t), y), tol) << dtype_name(t);

      combine_rows_backward_cpu(hm, dout.data(), rows.data(), weight.data(), drows.data(), dweight.data());
      Buffer ddout = upload(dev, alloc, dout, t), ddrows = upload(dev, alloc, std::vector<float>(drows.size(), 0.f), t);
      Buffer ddw = to_device(dev, alloc, std::vector<float>(dweight.size(), NAN));
      combine_rows_backward(ex, dm, ddout.data(), drv.data(), dw.as<float>(), ddrows.data(), ddw.as<float>(), t);
      EXPECT_LT(rel_l2(download(dev, alloc, ddrows, drows.size(), t), drows), tol) << dtype_name(t);
      EXPECT_LT(rel_l2(to_host<float>(dev, ddw, dweight.size()), dweight), tol) << dtype_name(t);

      dispatch_rows_backward_cpu(hm, rows.data(), dx.data(), false);
      Buffer ddx = upload(dev, alloc, std::vector<float>(dx.size(), NAN), t);
      dispatch_rows_backward(ex, dm, drv.data(), ddx.data(), false, t);
      EXPECT_LT(rel_l2(download(dev, alloc, ddx, dx.size(), t), dx), tol) << dtype_name(t);

      // A slice of the slots: combine adds into what is there, backward leaves unmapped dweight alone.
      const auto base = random_rounded(std::size_t(T) * h, t, 11);
      std::vector<float> y_acc = base, dw_slice(dweight.size(), 5.f);
      combine_rows_cpu(hm, rows.data(), weight.data(), y_acc.data(), true);
      Buffer dya = upload(dev, alloc, base, t);
      combine_rows(ex, dm, drv.data(), dw.as<float>(), dya.data(), t, /*accumulate=*/true);
      EXPECT_LT(rel_l2(download(dev, alloc, dya, y_acc.size(), t), y_acc), tol) << dtype_name(t) << " accumulate";
      std::vector<float> drows_slice(drows.size(), 0.f);
      combine_rows_backward_cpu(hm, dout.data(), rows.data(), weight.data(), drows_slice.data(), dw_slice.data(), true);
      Buffer ddws = to_device(dev, alloc, std::vector<float>(dweight.size(), 5.f));
      combine_rows_backward(ex, dm, ddout.data(), drv.data(), dw.as<float>(), ddrows.data(), ddws.as<float>(), t,
                            /*slice=*/true);
      EXPECT_LT(rel_l2(to_host<float>(dev, ddws, dw_slice.size()), dw_slice), tol) << dtype_name(t) << " slice";
    }
  }
}

TEST(GpuGroupedGemm, GroupedAndSerialMatchCpuWithEmptyExperts) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const int h = 64, f = 96;
  const std::vector<int> rows = {17, 0, 40, 1, 64};
  int R = 0;
  for (int r : rows) R += r;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (ExpertGemm mode : {ExpertGemm::serial, ExpertGemm::grouped}) {
      const auto x = random_rounded(std::size_t(R) * h, t, 11), w = random_rounded(rows.size() * h * f, t, 12);
      std::vector<float> want(std::size_t(R) * f, 0.f), dw_want(rows.size() * h * f);
      std::vector<GemmArgs> hp, hw;
      Buffer dx = upload(dev, alloc, x, t), dwt = upload(dev, alloc, w, t);
      Buffer dy = upload(dev, alloc, std::vector<float>(want.size(), NAN), t);
      Buffer dg = upload(dev, alloc, std::vector<float>(dw_want.size(), NAN), t);
      std::vector<GemmArgs> dp;
      const std::size_t es = dtype_size(t);
      int off = 0;
      for (std::size_t e = 0; e < rows.size(); ++e) {
        hp.push_back(dense_gemm(false, false, rows[e], f, h, x.data() + off * h, w.data() + e * h * f, want.data() + off * f));
        hp.push_back(dense_gemm(true, false, h, f, rows[e], x.data() + off * h, want.data() + off * f, dw_want.data() + e * h * f));
        dp.push_back(dense_gemm(false, false, rows[e], f, h, dx.as<char>() + off * h * es, dwt.as<char>() + e * h * f * es,
                                dy.as<char>() + off * f * es, t));
        off += rows[e];
      }
      grouped_gemm(Exec{}, {hp[0], hp[2], hp[4], hp[6], hp[8]}, ExpertGemm::serial, nullptr, 0);
      round_to(t, want.data(), want.size());  // the device stores y in t before dW reads it
      grouped_gemm(Exec{}, {hp[1], hp[3], hp[5], hp[7], hp[9]}, ExpertGemm::serial, nullptr, 0);
      Buffer ptrs = alloc.allocate(grouped_gemm_workspace_bytes(16), MemTag::buffers);
      dev.set_tensor_cores(true);
      const Exec ex = dev.exec(dev.default_stream());
      grouped_gemm(ex, dp, mode, ptrs.data(), ptrs.bytes());
      const double eps = t == DType::f32 ? 4.8828125e-04 : dtype_epsilon(t);
      const auto got = download(dev, alloc, dy, want.size(), t);
      EXPECT_LT(rel_l2(got, want), 4 * eps + 1e-6) << dtype_name(t) << (mode == ExpertGemm::grouped ? " grouped" : " serial");
      // weight gradients with an empty expert (k = 0 must give zeros) from the device outputs
      std::vector<GemmArgs> dpw;
      off = 0;
      for (std::size_t e = 0; e < rows.size(); ++e) {
        dpw.push_back(dense_gemm(true, false, h, f, rows[e], dx.as<char>() + off * h * es, dy.as<char>() + off * f * es,
                                 dg.as<char>() + e * h * f * es, t));
        off += rows[e];
      }
      grouped_gemm(ex, dpw, mode, ptrs.data(), ptrs.bytes());
      const auto gw = download(dev, alloc, dg, dw_want.size(), t);
      for (int i = 0; i < h * f; ++i) ASSERT_EQ(gw[std::size_t(h) * f + i], 0.f) << "empty expert gradient";
      EXPECT_LT(rel_l2(gw, dw_want), 8 * eps + 1e-6) << dtype_name(t);
    }
}

TEST(GpuAuxAndAxpy, MatchCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  GateShape g{96, 32, 2, 2};
  const std::size_t te = 96 * 32, ts = 96 * 4;
  std::vector<float> logits = random_rounded(te, DType::f32, 13), probs(te), weight(ts);
  std::vector<std::int32_t> expert(ts);
  softmax_topk_cpu(g, logits.data(), probs.data(), expert.data(), weight.data());
  std::vector<float> density(3 * 32), proxy(3 * 32);
  aux_loss_stats_cpu(g, 3, probs.data(), expert.data(), density.data(), proxy.data());
  Buffer dp = to_device(dev, alloc, probs), de = to_device(dev, alloc, expert);
  Buffer dd = alloc.allocate(96 * 4 * 3, MemTag::temporary), dq = alloc.allocate(96 * 4 * 3, MemTag::temporary);
  const Exec ex = dev.exec(dev.default_stream());
  aux_loss_stats(ex, g, 3, dp.as<float>(), de.as<std::int32_t>(), dd.as<float>(), dq.as<float>());
  EXPECT_EQ(to_host<float>(dev, dd, density.size()), density);
  EXPECT_LT(rel_l2(to_host<float>(dev, dq, proxy.size()), proxy), 1e-6);
  {  // the paper's layer: 8192 tokens over 64 experts in one group, each expert's column summed in parallel
    GateShape big{8192, 64, 1, 1};
    std::vector<float> bl = random_rounded(8192 * 64, DType::f32, 16), bp(8192 * 64), bw(8192), bd(64), bq(64);
    std::vector<std::int32_t> be(8192);
    softmax_topk_cpu(big, bl.data(), bp.data(), be.data(), bw.data());
    aux_loss_stats_cpu(big, 1, bp.data(), be.data(), bd.data(), bq.data());
    Buffer gp = to_device(dev, alloc, bp), ge = to_device(dev, alloc, be);
    Buffer gd = alloc.allocate(64 * 4, MemTag::temporary), gq = alloc.allocate(64 * 4, MemTag::temporary);
    aux_loss_stats(ex, big, 1, gp.as<float>(), ge.as<std::int32_t>(), gd.as<float>(), gq.as<float>());
    EXPECT_EQ(to_host<float>(dev, gd, 64), bd) << "a count is exact in any order";
    EXPECT_LT(rel_l2(to_host<float>(dev, gq, 64), bq), 1e-5);
  }
  {  // the logits' gradient with the aux loss's, over three token groups, as fp32 and as bf16 parts
    const auto dweight = random_rounded(ts, DType::f32, 17);
    GateGradArgs a{g, 3, expert.data(), dweight.data(), probs.data(), density.data(), 0.37f};
    Buffer ddw = to_device(dev, alloc, dweight);
    GateGradArgs on_device{g, 3, de.as<std::int32_t>(), ddw.as<float>(), dp.as<float>(), dd.as<float>(), 0.37f};
    std::vector<float> dlogits(te);
    gate_logit_grads_cpu(a, Bf16Parts{}, dlogits.data());
    Buffer ddl = to_device(dev, alloc, std::vector<float>(te, NAN));
    gate_logit_grads(ex, on_device, Bf16Parts{}, ddl.data());
    EXPECT_LT(rel_l2(to_host<float>(dev, ddl, te), dlogits), 1e-6);
    const Bf16Parts parts{4, {0, 1, 2, 0}};
    std::vector<std::uint16_t> want(4 * te);
    gate_logit_grads_cpu(a, parts, want.data());
    Buffer dparts = to_device(dev, alloc, std::vector<std::uint16_t>(4 * te, 0xFFFF));
    gate_logit_grads(ex, on_device, parts, dparts.data());
    const auto got = to_host<std::uint16_t>(dev, dparts, 4 * te);
    std::vector<float> got_sum(te), want_sum(te);  // the parts sum back to dlogits; each is its share
    for (std::size_t i = 0; i < te; ++i) {
      const std::size_t r = i / 32, c = i % 32;
      for (int s = 0; s < 3; ++s) {
        got_sum[i] += from_bits16(DType::bf16, got[r * 128 + s * 32 + c]);
        want_sum[i] += from_bits16(DType::bf16, want[r * 128 + s * 32 + c]);
      }
      ASSERT_EQ(got[r * 128 + 3 * 32 + c], got[r * 128 + c]) << "slice 3 is hi again";
    }
    EXPECT_LT(rel_l2(got_sum, want_sum), 1e-6);
    EXPECT_LT(rel_l2(got_sum, dlogits), 1e-6);
  }
  for (std::size_t n : {1000, 1003})  // all four at a time; then three one at a time
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const auto x = random_rounded(n, t, 14), y0 = random_rounded(n, t, 15);
    std::vector<float> y = y0;
    axpy_cpu(n, -0.5f, x.data(), y.data());
    Buffer dx = upload(dev, alloc, x, t), dy = upload(dev, alloc, y0, t);
    axpy(ex, n, -0.5f, dx.data(), dy.data(), t);
    EXPECT_LT(rel_l2(download(dev, alloc, dy, n, t), y), 2 * dtype_epsilon(t) + 1e-7) << dtype_name(t) << " n " << n;
  }
}

// NCCL at world size 1 carries the expert-parallel and PPMoE dispatchers' collectives.
TEST(GpuMoELayer, NcclDispatchersAtWorldOneMatchLocal) {
  MOEBENCH_REQUIRE_GPU(dev);
  Watchdog::set_timeout(60.0);  // a wait that hangs ends the test
  auto comm = make_world_communicator(*Runtime::current(), Backend::cuda);
  if (comm->size() != 1) GTEST_SKIP() << "run at world size 1";
  MoEConfig c;
  c.hidden = 32; c.ffn = 64; c.experts = 4; c.top_k = 2;
  const int T = 40;
  const auto x = testing_util::tokens(T, 32, 3), dy = testing_util::tokens(T, 32, 4);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  dev.set_tensor_cores(false);
  std::vector<std::vector<float>> ys, dxs;
  for (int which = 0; which < 3; ++which) {
    DispatcherEnv env{c, dev, alloc};
    auto d = which == 0 ? make_local_dispatcher(env) : which == 1 ? make_expert_parallel_dispatcher(env, *comm)
                                                                  : make_ppmoe_dispatcher(env, *comm);
    MoELayer layer(c, dev, alloc, std::move(d));
    const Stream& s = dev.default_stream();
    layer.init(5, s);
    Buffer bx = upload(dev, alloc, x, DType::f32), bdy = upload(dev, alloc, dy, DType::f32);
    Buffer by = upload(dev, alloc, x, DType::f32), bdx = upload(dev, alloc, x, DType::f32);
    MoEContext mb = layer.forward(bx.data(), T, by.data(), s);
    layer.backward(mb, bdy.data(), bdx.data(), s);
    ys.push_back(download(dev, alloc, by, x.size(), DType::f32));
    dxs.push_back(download(dev, alloc, bdx, x.size(), DType::f32));
  }
  for (int which = 1; which < 3; ++which) {
    EXPECT_LT(rel_l2(ys[which], ys[0]), 1e-6) << which;
    EXPECT_LT(rel_l2(dxs[which], dxs[0]), 1e-6) << which;
  }
}

// The layer as users run it: tensor cores on, fp16 and bf16 activations and experts. The gate
// stays in full fp32 (no TF32), so routing -- kept counts and expert choices -- equals the CPU's.
static void compare_layer_with_cpu(Device& dev, MoEConfig c, int T, bool tensor_cores, double tol, int groups = 1) {
  const DType t = c.dtype;
  auto x = testing_util::tokens(T, c.hidden, 1);
  auto dy = testing_util::tokens(T, c.hidden, 2);
  round_to(t, x.data(), x.size());
  round_to(t, dy.data(), dy.size());
  MoEConfig cc = c;
  cc.dtype = DType::f32;
  cc.expert_gemm = ExpertGemm::grouped;  // the reference route, its counts on the host
  testing_util::CpuLayer ref(cc, [groups](const DispatcherEnv& env) { return make_local_dispatcher(env, groups); });
  const std::size_t wn = std::size_t(c.experts) * ref.expert_weights();
  if (t != DType::f32) {  // the CPU reference gets the weights the GPU stores
    round_to(t, ref.w1(), wn);
    round_to(t, ref.w2(), wn);
  }
  ref.forward(x);
  ref.backward(dy);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  dev.set_tensor_cores(tensor_cores);
  MoELayer layer(c, dev, alloc, make_local_dispatcher(DispatcherEnv{c, dev, alloc}, groups));
  const Stream& s = dev.default_stream();
  layer.init(7, s);
  Buffer dx = upload(dev, alloc, x, t), ddy = upload(dev, alloc, dy, t);
  Buffer y = upload(dev, alloc, std::vector<float>(x.size(), NAN), t), dxo = upload(dev, alloc, std::vector<float>(x.size(), NAN), t);
  MoEContext mb = layer.forward(dx.data(), T, y.data(), s);
  layer.backward(mb, ddy.data(), dxo.data(), s);
  layer.read_counts(mb, s);  // --expert-gemm segmented left them on the device
  const std::string what = std::string(dtype_name(t)) + " h=" + std::to_string(c.hidden) + " f=" + std::to_string(c.ffn) +
                           " T=" + std::to_string(T) + (tensor_cores ? " tensor cores" : "");
  EXPECT_EQ(mb.routing.kept, ref.routing().kept) << what;
  EXPECT_EQ(to_host<std::int32_t>(dev, mb.routing.expert, std::size_t(T) * c.slots()), ref.slots(ref.routing().expert)) << what;
  EXPECT_EQ(to_host<std::int32_t>(dev, mb.routing.position, std::size_t(T) * c.slots()), ref.slots(ref.routing().position))
      << what;
  if (c.gate == GateImpl::paper) {  // the dense tensors: the mask exactly; the combine weights to
    // fp32 rounding (the GPU's gate GEMM and softmax sum in other orders than the CPU's)
    const std::size_t n = std::size_t(T) * c.experts * mb.routing.shape.capacity;
    const float* want = ref.routing().combine.as<float>();
    const std::vector<float> got = to_host<float>(dev, mb.routing.combine, n);
    double worst = 0;
    std::size_t zeros_differ = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst = std::max(worst, double(std::fabs(got[i] - want[i])));
      zeros_differ += (got[i] == 0.f) != (want[i] == 0.f);
    }
    EXPECT_EQ(zeros_differ, 0u) << what;
    EXPECT_LE(worst, 1e-6) << what << ": largest combine-weight difference";
    const float* mask = ref.routing().dispatch.as<float>();
    EXPECT_EQ(to_host<float>(dev, mb.routing.dispatch, n), std::vector<float>(mask, mask + n)) << what;
  }
  EXPECT_LT(rel_l2(download(dev, alloc, y, x.size(), t), ref.y), tol) << what;
  EXPECT_LT(rel_l2(download(dev, alloc, dxo, x.size(), t), ref.dx), tol) << what;
  const std::vector<float> gate_ref(ref.gate_g(), ref.gate_g() + std::size_t(c.hidden) * c.experts);
  EXPECT_LT(rel_l2(to_host<float>(dev, layer.gate().grad(), gate_ref.size()), gate_ref), tol) << what;
  const std::vector<float> w1_ref(ref.w1_g(), ref.w1_g() + wn), w2_ref(ref.w2_g(), ref.w2_g() + wn);
  EXPECT_LT(rel_l2(download(dev, alloc, layer.experts().w1_grad(), wn, t), w1_ref), tol) << what;
  EXPECT_LT(rel_l2(download(dev, alloc, layer.experts().w2_grad(), wn, t), w2_ref), tol) << what;
}

// The whole layer (gate, capacity in two groups, permutation, grouped experts, backward) on the
// GPU against the CPU layer with the same weights and tokens, tensor cores off.
TEST(GpuMoELayer, ForwardAndBackwardMatchTheCpuLayer) {
  MOEBENCH_REQUIRE_GPU(dev);
  for (DType t : {DType::f32, DType::bf16}) {
    MoEConfig c;
    c.hidden = 64; c.ffn = 128; c.experts = 8; c.prototypes = 2; c.top_k = 2;
    c.capacity_factor = 1.25;
    c.aux_coef = 0.1f;
    c.dtype = t;
    compare_layer_with_cpu(dev, c, 96, /*tensor_cores=*/false, t == DType::f32 ? 1e-5 : 3e-2, /*groups=*/2);
  }
}

// M6-T's gate (looped arg-max rounds, dense combine tensor, one-hot dispatch GEMMs) on the GPU
// against the CPU layer with the same gate, in two capacity groups; top-16 of 64 as Table 1.
TEST(GpuMoELayer, PaperGateMatchesTheCpuLayer) {
  MOEBENCH_REQUIRE_GPU(dev);
  for (auto [E, Z, k] : {std::tuple{8, 2, 2}, std::tuple{64, 1, 16}, std::tuple{64, 4, 4}}) {
    MoEConfig c;
    c.hidden = 64; c.ffn = 128; c.experts = E; c.prototypes = Z; c.top_k = k;
    c.capacity_factor = 1.0;
    c.aux_coef = 0.1f;
    c.gate = GateImpl::paper;
    compare_layer_with_cpu(dev, c, 128, /*tensor_cores=*/false, 1e-5, /*groups=*/2);
  }
}

TEST(GpuMoELayer, SixteenBitWithTensorCoresMatchesTheCpuLayer) {
  MOEBENCH_REQUIRE_GPU(dev);
  for (DType t : {DType::f16, DType::bf16}) {
    MoEConfig c;
    c.hidden = 128; c.ffn = 256; c.experts = 16; c.prototypes = 2; c.top_k = 2;
    c.capacity_factor = 1.25;
    c.dtype = t;
    compare_layer_with_cpu(dev, c, 512, /*tensor_cores=*/true, t == DType::f16 ? 2e-2 : 5e-2);
  }
  MoEConfig c;
  c.hidden = 128; c.ffn = 256; c.experts = 16; c.top_k = 1;
  compare_layer_with_cpu(dev, c, 512, /*tensor_cores=*/true, 1e-2);  // fp32 experts on TF32
  // cuBLASLt's batched GEMMs with GeLU epilogues; one GEMM per expert over side streams
  for (ExpertGemm route : {ExpertGemm::padded, ExpertGemm::streams})
    for (DType t : {DType::f32, DType::bf16}) {
      c.expert_gemm = route;
      c.dtype = t;
      compare_layer_with_cpu(dev, c, 509, /*tensor_cores=*/true, t == DType::f32 ? 1e-2 : 5e-2);
    }
  // The padded route with the busier experts in the overflow (its fixed cost and row tile taken
  // away, so the blocks come lower than the busiest): their GEMMs of their own after the batched ones.
  c.expert_gemm = ExpertGemm::padded;
  c.padded_cost = {0, 1};
  for (DType t : {DType::f32, DType::bf16}) {
    c.dtype = t;
    compare_layer_with_cpu(dev, c, 509, /*tensor_cores=*/true, t == DType::f32 ? 1e-2 : 5e-2);
  }
  c.padded_cost = PaddedBlockCost{};
  // Our segment GEMMs, counts on the device: 16 experts of about 32 rows, then 4 of about 255 (more
  // than a 128-row tile each)
  c.expert_gemm = ExpertGemm::segmented;
  for (DType t : {DType::f16, DType::bf16})
    for (auto [E, T] : {std::pair{16, 509}, std::pair{4, 1021}}) {
      c.dtype = t;
      c.experts = E;
      compare_layer_with_cpu(dev, c, T, /*tensor_cores=*/true, t == DType::f16 ? 2e-2 : 5e-2);
    }
}

// Widths that are not multiples of 8 and a token count that is a multiple of nothing: fp32
// grouped and 16-bit serial work; 16-bit grouped is refused with a clear error.
TEST(GpuMoELayer, OddSizesWorkOrAreRefusedClearly) {
  MOEBENCH_REQUIRE_GPU(dev);
  MoEConfig c;
  c.hidden = 100; c.ffn = 196; c.experts = 6; c.top_k = 2;
  c.capacity_factor = 1.5;
  compare_layer_with_cpu(dev, c, 77, false, 1e-5);
  c.dtype = DType::f16;
  c.expert_gemm = ExpertGemm::serial;
  compare_layer_with_cpu(dev, c, 77, true, 2e-2);
  c.expert_gemm = ExpertGemm::grouped;
  ASSERT_TRUE(c.validate_for(Backend::cuda));
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  MoELayer layer(c, dev, alloc, make_local_dispatcher(DispatcherEnv{c, dev, alloc}));
  layer.init(7, dev.default_stream());
  const auto x = testing_util::tokens(77, c.hidden, 1);
  Buffer dx = upload(dev, alloc, x, c.dtype), y = upload(dev, alloc, x, c.dtype);
  try {
    layer.forward(dx.data(), 77, y.data(), dev.default_stream());
    FAIL() << "16-bit grouped GEMM on rows of 100 elements ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("16-byte aligned"), std::string::npos) << e.what();
  }
}

}  // namespace moebench
