// The experts' padded and streams routes (--expert-gemm) against the grouped one, and the padded
// route's parts: the strided-batched GEMM with GeLU epilogues and the row padding. Each route must
// compute the same layer -- empty experts and one far busier than the mean included -- and do it
// its own way: padded as one batched GEMM per step with GeLU inside the GEMMs, streams as one
// GEMM per expert spread over side streams.
#include <gtest/gtest.h>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include "kernels/batched_gemm.h"
#include "kernels/gelu_math.h"
#include "kernels/pad_rows.h"
#include "moe/padded_blocks.h"
#include "expert_route_run.h"
#include "timeline_util.h"

namespace moebench {
using namespace testing_util;

namespace {
std::vector<float> product(const std::vector<float>& a, const std::vector<float>& b, int m, int n, int k, int entry) {
  std::vector<float> c(std::size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int q = 0; q < k; ++q) s += double(a[entry * m * k + i * k + q]) * b[entry * k * n + q * n + j];
      c[i * n + j] = float(s);
    }
  return c;
}
}  // namespace

TEST(BatchedGemm, GeluEpiloguesPerEntryAndEmptyProducts) {
  const int batch = 3, m = 5, n = 8, k = 4;
  const auto a = tokens(batch * m, k, 1), b = tokens(batch * k, n, 2);
  std::vector<float> c(batch * m * n, NAN), aux(batch * m * n, NAN);
  BatchedGemmArgs args;
  args.g = dense_gemm(false, false, m, n, k, a.data(), b.data(), c.data());
  args.batch = batch;
  args.stride_a = m * k, args.stride_b = k * n, args.stride_c = m * n;
  args.epilogue = Epilogue::gelu_aux;
  args.aux = aux.data();
  batched_gemm(Exec{}, args);
  for (int e = 0; e < batch; ++e) {
    const auto p = product(a, b, m, n, k, e);
    for (int i = 0; i < m * n; ++i) {
      EXPECT_NEAR(aux[e * m * n + i], p[i], 1e-5f) << "entry " << e;
      EXPECT_NEAR(c[e * m * n + i], gelu_math::forward(p[i]), 1e-5f) << "entry " << e;
    }
  }
  // dgelu: C = AB * GeLU'(aux), aux now read
  std::vector<float> dc(batch * m * n, NAN);
  args.g.c = dc.data();
  args.epilogue = Epilogue::dgelu;
  batched_gemm(Exec{}, args);
  for (int e = 0; e < batch; ++e) {
    const auto p = product(a, b, m, n, k, e);
    for (int i = 0; i < m * n; ++i)
      EXPECT_NEAR(dc[e * m * n + i], p[i] * gelu_math::derivative(aux[e * m * n + i]), 1e-5f) << "entry " << e;
  }
  // k = 0: C = beta C; with beta 0 (and an epilogue's aux) zero, whatever they held.
  std::fill(c.begin(), c.end(), NAN);
  std::fill(aux.begin(), aux.end(), NAN);
  args.g = dense_gemm(false, false, m, n, 0, a.data(), b.data(), c.data());
  args.epilogue = Epilogue::gelu_aux;
  batched_gemm(Exec{}, args);
  EXPECT_TRUE(std::all_of(c.begin(), c.end(), [](float v) { return v == 0.f; }));
  EXPECT_TRUE(std::all_of(aux.begin(), aux.end(), [](float v) { return v == 0.f; }));
  args.g.beta = 1.f;  // an epilogue needs beta 0
  EXPECT_THROW(batched_gemm(Exec{}, args), Error);
}

TEST(PadRows, BlocksOfTheBusiestExpertsRowsZeroPaddedAndBackOrInPlace) {
  const int width = 3;
  const RowPadding p{{0, 2, 2, 5}, 3, width, DType::f32};  // experts of 2, 0 and 3 rows
  std::vector<float> packed(5 * width), padded(3 * 3 * width, NAN), back(5 * width, NAN);
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = float(i + 1);
  pad_rows(Exec{}, p, packed.data(), padded.data());
  const std::vector<int> block_row_of_packed = {0, 1, 6, 7, 8};  // expert 0: rows 0-1; expert 2: rows 6-8
  for (int r = 0; r < 5; ++r)
    for (int j = 0; j < width; ++j) EXPECT_EQ(padded[block_row_of_packed[r] * width + j], packed[r * width + j]);
  for (int r : {2, 3, 4, 5})
    for (int j = 0; j < width; ++j) EXPECT_EQ(padded[r * width + j], 0.f) << "padding row " << r;
  unpad_rows(Exec{}, p, padded.data(), back.data());
  EXPECT_EQ(back, packed);
  // Rows a dispatcher wrote into the blocks itself: only the padding rows become zero.
  std::vector<float> in_place(padded.size(), NAN);
  for (int r : {0, 1, 6, 7, 8}) std::fill_n(in_place.begin() + r * width, width, float(r));
  zero_padding_rows(Exec{}, p, in_place.data());
  for (int r = 0; r < 9; ++r)
    for (int j = 0; j < width; ++j) EXPECT_EQ(in_place[r * width + j], r >= 2 && r <= 5 ? 0.f : float(r)) << r;
  const RowPadding backwards{{0, 2, 1, 5}, 3, width, DType::f32};
  EXPECT_THROW(pad_rows(Exec{}, backwards, packed.data(), padded.data()), Error);
}

// Blocks lower than an expert's rows: its block is all padding and its rows follow the blocks, in
// order, experts in order, where GEMMs of their own take them.
TEST(PadRows, AnExpertTooBusyForItsBlockGoesToTheOverflow) {
  const int width = 2;
  const RowPadding p{{0, 3, 4, 4, 9}, 2, width, DType::f32};  // experts of 3, 1, 0 and 5 rows
  EXPECT_EQ(padded_starts(p.offset, p.padded), (std::vector<std::size_t>{8, 2, 4, 11, 16}));
  std::vector<float> packed(9 * width), padded(16 * width, NAN), back(9 * width, NAN);
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = float(i + 1);
  pad_rows(Exec{}, p, packed.data(), padded.data());
  const std::vector<int> row_of_packed = {8, 9, 10, 2, 11, 12, 13, 14, 15};
  for (int r = 0; r < 9; ++r)
    for (int j = 0; j < width; ++j) EXPECT_EQ(padded[row_of_packed[r] * width + j], packed[r * width + j]) << r;
  for (int r : {0, 1, 3, 4, 5, 6, 7})  // expert 0's and 3's blocks, expert 1's second row, expert 2's block
    for (int j = 0; j < width; ++j) EXPECT_EQ(padded[r * width + j], 0.f) << "padding row " << r;
  unpad_rows(Exec{}, p, padded.data(), back.data());
  EXPECT_EQ(back, packed);
  std::vector<float> in_place(padded.size(), NAN);
  for (int r : row_of_packed) std::fill_n(in_place.begin() + r * width, width, float(r));
  zero_padding_rows(Exec{}, p, in_place.data());
  for (int r = 0; r < 8; ++r)
    if (r != 2) {
      EXPECT_EQ(in_place[r * width], 0.f) << "padding row " << r;
    }
  for (int r : row_of_packed) EXPECT_EQ(in_place[r * width], float(r)) << "a row of an expert, " << r;
  // Every expert in its block, none short of it: nothing to zero.
  const RowPadding full{{0, 2, 4}, 2, width, DType::f32};
  EXPECT_EQ(padded_starts(full.offset, full.padded), (std::vector<std::size_t>{0, 2, 4}));
}

TEST(PaddedExperts, EqualTheGroupedLayerWithEmptyAndHotExperts) {
  struct Case {
    const char* name;
    int experts, k, tokens;
    bool hot, keep;
  };
  for (const Case& cs : {Case{"few tokens: empty experts", 8, 1, 5, false, true},
                         Case{"a hot expert, top-2", 4, 2, 24, true, true},
                         Case{"a hot expert, GeLU recomputed", 4, 1, 24, true, false}}) {
    SCOPED_TRACE(cs.name);
    CpuLayer grouped(route_config(ExpertGemm::grouped, cs.experts, cs.k, cs.keep), local_dispatcher);
    CpuLayer padded(route_config(ExpertGemm::padded, cs.experts, cs.k, cs.keep), local_dispatcher);
    padded.alloc.set_poison(true);  // padding rows left unzeroed would be NaN
    expect_same_step(padded, grouped, cs.tokens, cs.hot);
    const ExpertsContext& ec = padded.ctx->experts;
    const int busiest = *std::max_element(ec.rows.begin(), ec.rows.end());
    EXPECT_EQ(ec.padded, (busiest + 63) / 64 * 64) << "the busiest expert's rows, to the top of its tile";
    EXPECT_EQ(ec.computed_rows(), std::size_t(cs.experts) * ec.padded);
    if (cs.hot) EXPECT_GE(busiest, cs.tokens - 2) << "the hot expert takes the steered tokens";
    else EXPECT_TRUE(std::count(ec.rows.begin(), ec.rows.end(), 0) > 0) << "some expert is empty";
  }
}

// The blocks' height: the busiest expert's on a balanced load; under skew, the one that costs least
// with the hot experts' rows (and each one's fixed cost) in the overflow, rows counted in tiles;
// then the top of its tile.
TEST(PaddedBlocks, AsTallAsTheBusiestExpertUnlessTheOverflowCostsLess) {
  const PaddedBlockCost paper;  // the defaults: 384 rows apart, tiles of 64
  EXPECT_EQ(padded_block_rows({}, paper), 0);
  EXPECT_EQ(padded_block_rows({0, 0, 0}, paper), 0);
  EXPECT_EQ(padded_block_rows({120, 171, 128, 140}, paper), 192) << "balanced: every expert in its block";
  EXPECT_EQ(padded_block_rows({120, 150, 128, 140}, paper), 192) << "routing that moves rows within a tile: one shape";
  EXPECT_EQ(padded_block_rows({0, 0, 0, 500}, paper), 512) << "never blocks of no rows while an expert has some";
  // 64 experts, one of 2470 rows, the rest 90: blocks of 2470 cost 64 x 2496 rows; of 90, 64 x 128 + 2496 + 384.
  std::vector<int> zipf(64, 90);
  zipf[5] = 2470;
  EXPECT_EQ(padded_block_rows(zipf, paper), 128);
  // One tile holds 161 and 171 alike: lower blocks would only add an expert's own GEMMs.
  std::vector<int> natural(64, 150);
  natural[7] = 171;
  natural[9] = 161;
  EXPECT_EQ(padded_block_rows(natural, paper), 192);
  // An expert above the chosen height but within its tile fits in its block: not in the overflow.
  std::vector<int> near(64, 100);
  near[3] = 240;  // 64 x 256 rows against 64 x 128 + 256 + 384: blocks of 100, rounded to 128
  near[4] = 120;
  EXPECT_EQ(padded_block_rows(near, paper), 128);
  EXPECT_EQ(padded_block_rows(natural, {0, 1}), 150) << "untiled and free, 64 x 21 rows saved against 171 + 161";
  // The fixed cost keeps a busy expert in its block: 4 x 10 rows beat 4 x 2 + 10 + 40; without it, 18.
  EXPECT_EQ(padded_block_rows({2, 10, 2, 2}, {40, 1}), 10);
  EXPECT_EQ(padded_block_rows({2, 10, 2, 2}, {0, 1}), 2);
  // Equal costs: the taller blocks (4 x 6 = 24 against 4 x 2 + 6 + 10).
  EXPECT_EQ(padded_block_rows({2, 6, 2, 2}, {10, 1}), 6);
}

// A hot expert in a layer whose overflow costs nothing extra, rows counted one by one: the blocks
// are the other experts' height, the hot one's rows go to the overflow, and the layer is still the grouped one's; each
// step's batched GEMM is followed by one GEMM of the hot expert's rows.
TEST(PaddedExperts, AHotExpertInTheOverflowStillEqualsTheGroupedLayer) {
  for (int k : {1, 2}) {
    SCOPED_TRACE("top-" + std::to_string(k));
    const int E = 4, T = 24;
    MoEConfig cfg = route_config(ExpertGemm::padded, E, k);
    cfg.padded_cost = {0, 1};
    CpuLayer grouped(route_config(ExpertGemm::grouped, E, k), local_dispatcher), padded(cfg, local_dispatcher);
    padded.alloc.set_poison(true);  // an overflow or padding row left unwritten would be NaN
    expect_same_step(padded, grouped, T, true);
    const ExpertsContext& ec = padded.ctx->experts;
    const int busiest = *std::max_element(ec.rows.begin(), ec.rows.end());
    ASSERT_EQ(busiest, ec.rows[2]) << "the hot expert";
    EXPECT_LT(ec.padded, busiest);
    EXPECT_EQ(ec.padded, padded_block_rows(ec.rows, cfg.padded_cost));
    std::size_t overflow = 0;
    for (int r : ec.rows) overflow += r > ec.padded ? std::size_t(r) : 0;
    EXPECT_EQ(ec.computed_rows(), std::size_t(E) * ec.padded + overflow);
    EXPECT_LT(ec.computed_rows(), std::size_t(E) * busiest);
    EXPECT_EQ(padded.ctx->dispatch->rows.bytes(), ec.computed_rows() * cfg.hidden * sizeof(float));
  }
  MoEConfig cfg = route_config(ExpertGemm::padded, 4, 1);
  cfg.padded_cost = {0, 1};
  CpuLayer L(cfg, local_dispatcher);
  int P = 0;
  std::vector<std::array<int, 3>> gemms;  // batch, m, k of each GEMM, in order
  for (const TimelineEntry& e : recorded_hot_step(L, 24, 1, &P))
    if (!e.range && e.name == "batched_gemm")
      gemms.push_back({int(number_arg(e, "batch")), int(number_arg(e, "m")), int(number_arg(e, "k"))});
  ASSERT_EQ(gemms.size(), 12u) << "six batched GEMMs, each with the hot expert's own after it";
  for (std::size_t i = 0; i < gemms.size(); i += 2) {
    EXPECT_EQ(gemms[i][0], 4);
    EXPECT_TRUE(gemms[i][1] == P || gemms[i][2] == P) << "the blocks' rows, or the sum over them";
    EXPECT_EQ(gemms[i + 1][0], 1);
    EXPECT_TRUE(gemms[i + 1][1] >= 22 || gemms[i + 1][2] >= 22) << "the hot expert's rows, or the sum over them";
  }
}

// Forward is two batched GEMMs (GeLU in the first's epilogue), backward four, with GeLU's
// gradient one kernel right after the first (over a batch, cuBLASLt runs its DGELU epilogue as a
// kernel apart, and the slower one): every expert in each GEMM, as tall as the busiest expert.
TEST(PaddedExperts, OneBatchedGemmPerStepWithGeluInTheForwardsEpilogue) {
  const int E = 4, T = 24;
  CpuLayer L(route_config(ExpertGemm::padded, E, 1), local_dispatcher);
  int busiest = 0;
  const std::vector<TimelineEntry> all = recorded_hot_step(L, T, 1, &busiest);
  std::vector<std::string> steps;  // each GEMM's epilogue, and the GeLU kernels
  for (const TimelineEntry& e : all) {
    if (e.range) continue;
    if (e.name == "gelu_forward" || e.name == "gelu_backward") steps.push_back(e.name);
    if (e.name == "gelu_backward_in_blocks") {  // the expert rows alone, not the padding
      steps.push_back(e.name);
      EXPECT_EQ(number_arg(e, "rows"), T) << e.args;
      EXPECT_EQ(number_arg(e, "layout_rows"), double(E) * busiest) << e.args;
    }
    if (e.name != "batched_gemm") continue;
    EXPECT_EQ(number_arg(e, "batch"), E);
    const double m = number_arg(e, "m"), k = number_arg(e, "k");
    EXPECT_TRUE(m == busiest || k == busiest) << e.args;  // rows, or the reduction over rows
    steps.push_back(arg_text(e, "epilogue"));
  }
  EXPECT_GE(busiest, T - 2);
  const std::vector<std::string> want = {"\"gelu_aux\"", "\"none\"", "\"none\"", "gelu_backward_in_blocks",
                                         "\"none\"",     "\"none\"", "\"none\""};
  EXPECT_EQ(steps, want);
}

// The local dispatcher writes the rows straight into the blocks and the combine reads them there:
// nothing is padded or unpadded in the step, the padding rows of the rows and of their gradient
// are zeroed in place (one op each), and the blocks are all the dispatched rows there are.
TEST(PaddedExperts, TheLocalDispatcherFillsTheBlocksItself) {
  const int E = 4, T = 24;
  CpuLayer L(route_config(ExpertGemm::padded, E, 1), local_dispatcher);
  int busiest = 0;
  std::map<std::string, int> ops;
  for (const TimelineEntry& e : recorded_hot_step(L, T, 1, &busiest))
    if (!e.range) ++ops[e.name];
  EXPECT_EQ(ops["pad_rows"], 0);
  EXPECT_EQ(ops["unpad_rows"], 0);
  EXPECT_EQ(ops["zero_padding_rows"], 2) << "the dispatched rows, the gradient of the outputs";
  EXPECT_EQ(ops["dispatch_rows"], 1);
  L.forward(tokens(T, L.cfg().hidden, 3));
  const DispatchState& d = *L.ctx->dispatch;
  EXPECT_EQ(d.padded, L.ctx->experts.padded);
  EXPECT_TRUE(L.ctx->experts.given_padded);
  EXPECT_EQ(d.rows.bytes(), std::size_t(E) * d.padded * L.cfg().hidden * sizeof(float));
}

// MPMoE's S2 / S4 restore dropped rows by dispatching again: the same blocks, padding included.
TEST(PaddedExperts, ARedispatchRefillsTheSameBlocks) {
  const int E = 4, T = 24;
  CpuLayer L(route_config(ExpertGemm::padded, E, 2), local_dispatcher);
  L.alloc.set_poison(true);
  auto x = tokens(T, L.cfg().hidden, 3);
  make_hot(L, x, T, 1);
  L.forward(x);
  const Stream& s = L.dev.default_stream();
  const DispatchState& d = *L.ctx->dispatch;
  const auto re = L.layer->dispatcher().redispatch(d, x.data(), s);
  s.synchronize();
  EXPECT_EQ(re->padded, d.padded);
  ASSERT_EQ(re->rows.bytes(), d.rows.bytes());
  EXPECT_EQ(0, std::memcmp(re->rows.data(), d.rows.data(), d.rows.bytes()));
}

// The experts take rows packed (as the expert-parallel exchanges deliver them: padded and unpadded
// here) or already in their blocks, and compute the same.
TEST(PaddedExperts, TakeRowsPackedOrInTheirBlocks) {
  const int E = 4, h = 16, f = 24, P = 7;
  const MoEConfig cfg = route_config(ExpertGemm::padded, E, 1);
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  alloc.set_poison(true);
  const Stream& s = dev.default_stream();
  const std::vector<int> rows = {3, 0, 7, 1};
  const std::vector<std::size_t> offset = {0, 3, 3, 10, 11};
  const auto x = tokens(11, h, 5), dy = tokens(11, h, 6);
  struct Run {
    std::vector<float> y, dx, g1, g2;
  };
  const auto run = [&](int blocks) {  // the blocks' height, or 0: packed
    const RowPadding pad{offset, blocks, h, DType::f32};
    Experts ex(cfg, dev, alloc, 0, E);
    ex.init(7, s);
    const std::size_t n = blocks ? padded_starts(offset, blocks).back() : 11;
    std::vector<float> xin(n * h, NAN), din(n * h, NAN), y(n * h, NAN), dx(n * h, NAN);
    if (blocks) {
      pad_rows(Exec{}, pad, x.data(), xin.data());
      pad_rows(Exec{}, pad, dy.data(), din.data());
    } else {
      xin = x, din = dy;
    }
    ex.zero_grad(s);
    ExpertsContext c = ex.forward(xin.data(), rows, y.data(), s, blocks);
    ex.backward(c, din.data(), dx.data(), s);
    s.synchronize();
    EXPECT_EQ(c.padded, blocks ? blocks : 64) << "packed: the busiest expert's tile, at these loads";
    if (blocks) {
      EXPECT_EQ(c.computed_rows(), n);
    }
    Run r{y, dx, {}, {}};
    if (blocks) {
      r.y.resize(11 * h), r.dx.resize(11 * h);
      unpad_rows(Exec{}, pad, y.data(), r.y.data());
      unpad_rows(Exec{}, pad, dx.data(), r.dx.data());
    }
    const float* g1 = ex.w1_grad().as<float>();
    const float* g2 = ex.w2_grad().as<float>();
    r.g1.assign(g1, g1 + std::size_t(E) * h * f);
    r.g2.assign(g2, g2 + std::size_t(E) * h * f);
    return r;
  };
  const Run packed = run(0);
  for (int height : {P, 2}) {  // every expert in its block; experts 0 and 2 in the overflow
    SCOPED_TRACE("blocks of " + std::to_string(height) + " rows");
    const Run blocks = run(height);
    EXPECT_LT(rel_diff(blocks.y.data(), packed.y.data(), packed.y.size()), 1e-6);
    EXPECT_LT(rel_diff(blocks.dx.data(), packed.dx.data(), packed.dx.size()), 1e-6);
    EXPECT_LT(rel_diff(blocks.g1.data(), packed.g1.data(), packed.g1.size()), 1e-6);
    EXPECT_LT(rel_diff(blocks.g2.data(), packed.g2.data(), packed.g2.size()), 1e-6);
  }
  // Blocks for another route: refused.
  std::vector<float> buf(std::size_t(E) * P * h, 0.f), y(buf.size());
  const MoEConfig grouped = route_config(ExpertGemm::grouped, E, 1);
  Experts gx(grouped, dev, alloc, 0, E);
  EXPECT_THROW(gx.forward(buf.data(), rows, y.data(), s, P), Error);
  // Row counts for another number of experts than the rank holds: refused, never read past.
  EXPECT_THROW(gx.forward(buf.data(), std::vector<int>{3, 0, 7}, y.data(), s), Error);
}

TEST(PaddedExperts, TheGpuNeedsAnFfnWidthInMultiplesOfEight) {
  MoEConfig c = route_config(ExpertGemm::padded, 8, 1);
  c.ffn = 36;
  EXPECT_FALSE(c.validate_for(Backend::cpu));
  const auto e = c.validate_for(Backend::cuda);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rfind("--ffn: 36 is not a multiple of 8, which --expert-gemm padded needs on the GPU", 0), 0u) << *e;
  c.ffn = 40;
  EXPECT_FALSE(c.validate_for(Backend::cuda));
}

// Unless --expert-gemm names one: padded on the GPU, where it ran fastest at every popularity
// measured and its epilogue takes the width; grouped where it does not, and on the CPU.
TEST(PaddedExperts, TheDefaultRouteOnTheGpuWhereItsEpilogueTakesTheWidth) {
  EXPECT_EQ(default_expert_gemm(Backend::cuda, 4096), ExpertGemm::padded);
  EXPECT_EQ(default_expert_gemm(Backend::cuda, 36), ExpertGemm::grouped);
  EXPECT_EQ(default_expert_gemm(Backend::cpu, 4096), ExpertGemm::grouped);
  MoEConfig c = route_config(default_expert_gemm(Backend::cuda, 36), 8, 1);
  c.ffn = 36;
  EXPECT_FALSE(c.validate_for(Backend::cuda)) << "the default runs where padded would be refused";
}

// The streams route: the same layer, every expert GEMM of forward and backward on a side stream
// (more than one of them in use), none on the layer's own stream, which keeps the gate's.
TEST(StreamsExperts, EqualTheGroupedLayerWithTheirGemmsOnSideStreams) {
  const int E = 4, T = 24, h = 16;
  CpuLayer grouped(route_config(ExpertGemm::grouped, E, 2), local_dispatcher), streams(route_config(ExpertGemm::streams, E, 2), local_dispatcher);
  auto x = tokens(T, h, 3);
  make_hot(grouped, x, T, 2);
  make_hot(streams, x, T, 2);
  const auto dy = tokens(T, h, 4);
  grouped.forward(x);
  grouped.backward(dy);
  std::vector<float> y(x.size()), dx(x.size());
  const Stream s = streams.dev.create_stream("layer");  // queued: its ops are on the timeline
  std::vector<TimelineEntry> all;
  std::vector<int> rows;
  {
    RecordedTimeline timeline;
    streams.layer->zero_grad(s);
    MoEContext ctx = streams.layer->forward(x.data(), T, y.data(), s);
    streams.layer->backward(ctx, dy.data(), dx.data(), s);
    s.synchronize();
    all = timeline.entries();
    rows = ctx.experts.rows;
  }
  const std::size_t n = std::size_t(E) * grouped.expert_weights();
  EXPECT_LT(rel_diff(y.data(), grouped.y.data(), x.size()), 1e-5);
  EXPECT_LT(rel_diff(dx.data(), grouped.dx.data(), x.size()), 1e-5);
  EXPECT_LT(rel_diff(streams.w1_g(), grouped.w1_g(), n), 1e-5);
  EXPECT_LT(rel_diff(streams.w2_g(), grouped.w2_g(), n), 1e-5);
  std::map<int, int> gemms_per_track;
  for (const TimelineEntry& e : all)
    if (!e.range && e.name == "gemm") ++gemms_per_track[e.track];
  const int nonempty = int(std::count_if(rows.begin(), rows.end(), [](int r) { return r > 0; }));
  EXPECT_EQ(gemms_per_track[s.id], 3) << "the gate's projection forward, its two backward GEMMs";
  int on_side = 0, side_tracks = 0;
  for (const auto& [track, count] : gemms_per_track)
    if (track != s.id) on_side += count, ++side_tracks;
  // forward X W1, A W2 and backward dA, dX per expert with rows; dW2, dW1 for every expert
  EXPECT_EQ(on_side, 4 * nonempty + 2 * E);
  EXPECT_GE(side_tracks, 2);
}

}  // namespace moebench
