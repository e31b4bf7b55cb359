// The pipelined MoE layer at whatever world size mpirun gives (CTest: 1, 2 and 4 ranks) equals
// the unpipelined expert-parallel layer -- outputs, input gradients, gate and expert weight
// gradients -- for MPMoE with n in {1, 2, 3, 4, 8} (13 tokens per rank: n = 3, 4, 8 do not
// divide them), without memory reuse and with every restore strategy S1-S4, and for the
// FasterMoE-style split with every group size that divides the world. Capacity drops and two
// prototypes of top-2 are on, so slicing must keep exactly the whole batch's routing; parts of
// one token with top-1 leave some rank without rows in some part. Run in the pool's poison
// mode (CTest): a part reading a shared buffer after its turn reads NaN. On
// MOEBENCH_TEST_BACKEND's backend (on cuda over NCCL, each part's exchanges on their own streams).
#include <gtest/gtest.h>
#include <mpi.h>
#include <numeric>
#include "moe/pipelined_layer.h"
#include "moe_test_util.h"
#include "comm/comm.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

struct Result {
  std::vector<float> y, dx, gate, w1, w2;
};

class PipelinedLayer : public test_backend::WorldTest<test_backend::WorldOf::backend> {
 protected:
  void SetUp() override {
    WorldTest::SetUp();
    dispatch_comm = world->dup();
    combine_comm = world->dup();
    streams = PipelineStreams{dev.create_stream("compute"), dev.create_stream("dispatch"), dev.create_stream("combine"),
                              dev.create_stream("copy")};
    x = tokens(T, cfg.hidden, 100, world->rank() * T);
    dy = tokens(T, cfg.hidden, 200, world->rank() * T);
  }

  template <class Layer>
  Result grads(Layer& layer, std::vector<float> y, std::vector<float> dx) {
    const std::size_t g = std::size_t(cfg.hidden) * cfg.experts;
    const std::size_t w = std::size_t(layer.experts().count()) * cfg.hidden * cfg.ffn;
    auto first = [this](const Buffer& b, std::size_t n) {
      std::vector<float> v = test_backend::host_floats(dev, b);
      v.resize(n);
      return v;
    };
    return Result{std::move(y), std::move(dx), first(layer.gate().grad(), g), first(layer.experts().w1_grad(), w),
                  first(layer.experts().w2_grad(), w)};
  }

  Result unpipelined() {
    MoELayer layer(cfg, dev, alloc, make_expert_parallel_dispatcher(DispatcherEnv{cfg, dev, alloc}, *world));
    const Stream& s = dev.default_stream();
    layer.init(7, s);
    std::vector<float> y(x.size()), dx(x.size());
    test_backend::DeviceMirror d(dev, s);
    MoEContext c = layer.forward(d(x), T, d(y), s);
    layer.backward(c, d(dy), d(dx), s);
    dev.synchronize();
    d.sync();
    return grads(layer, y, dx);
  }

  Result pipelined(const PipelineConfig& pipe, std::size_t* pinned_peak = nullptr) {
    TrackingAllocator own(dev.backend(), dev.default_stream());
    PipelinedMoELayer layer(cfg, pipe, dev, own, *dispatch_comm, *combine_comm);
    layer.init(7, streams.compute);
    std::vector<float> y(x.size(), NAN), dx(x.size(), NAN);
    test_backend::DeviceMirror d(dev, dev.default_stream());
    PipelinedContext c = layer.forward(d(x), T, d(y), streams);
    layer.backward(c, d(dy), d(dx), streams);
    dev.synchronize();
    d.sync();
    if (pinned_peak) *pinned_peak = own.pinned_peak();
    return grads(layer, y, dx);
  }

  void expect_equal(const Result& got, const Result& want, const std::string& what) {
    const double tol = test_backend::f32_tolerance(1e-5);
    EXPECT_LT(rel_diff(got.y.data(), want.y.data(), want.y.size()), tol) << what << ": y";
    EXPECT_LT(rel_diff(got.dx.data(), want.dx.data(), want.dx.size()), tol) << what << ": dx";
    EXPECT_LT(rel_diff(got.gate.data(), want.gate.data(), want.gate.size()), tol) << what << ": gate gradient";
    EXPECT_LT(rel_diff(got.w1.data(), want.w1.data(), want.w1.size()), tol) << what << ": w1 gradient";
    EXPECT_LT(rel_diff(got.w2.data(), want.w2.data(), want.w2.size()), tol) << what << ": w2 gradient";
  }

  MoEConfig cfg = multi_rank_test_config();
  const int T = 13;
  Device dev = test_backend::open_device();
  TrackingAllocator alloc{dev.backend(), dev.default_stream()};
  std::unique_ptr<Communicator> dispatch_comm, combine_comm;
  PipelineStreams streams;
  std::vector<float> x, dy;
};

}  // namespace

TEST_F(PipelinedLayer, MPMoEEveryGranularityAndRestoreStrategyEqualsTheUnpipelinedLayer) {
  const Result want = unpipelined();
  for (int n : {1, 2, 3, 4, 8}) {
    std::size_t gate_pinned = 0;  // with no reuse strategy: the gate's read-back of the counts only
    for (MemoryReuse reuse : {MemoryReuse::none, MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4}) {
      PipelineConfig pipe;
      pipe.partitions = n;
      pipe.reuse = reuse;
      std::size_t pinned = 0;
      expect_equal(pipelined(pipe, &pinned), want, pipe.describe());
      if (reuse == MemoryReuse::none) {
        gate_pinned = pinned;
        // at most [routed | kept | density | proxy], 4 bytes each, per group (<= T) and expert
        EXPECT_LE(gate_pinned, 4 * 4 * std::size_t(cfg.experts) * std::size_t(T)) << pipe.describe();
        continue;
      }
      // Only the offloading strategies use pinned host memory beyond the gate's.
      EXPECT_EQ(pinned > gate_pinned, reuse == MemoryReuse::s1 || reuse == MemoryReuse::s2 || reuse == MemoryReuse::s3)
          << pipe.describe();
    }
  }
}

// The experts' padded route inside MPMoE's parts: T_M is the padded layout's GeLU input, offloaded
// (S1, S2), recomputed (S3, S4) or shared, and the layer still equals the unpipelined grouped one,
// also with experts in the overflow.
TEST_F(PipelinedLayer, PaddedExpertsInEveryPartEqualTheUnpipelinedLayer) {
  const Result want = unpipelined();
  cfg.expert_gemm = ExpertGemm::padded;
  for (bool overflow : {false, true}) {  // with its costs taken away, the busier experts in the overflow
    if (overflow) cfg.padded_cost = {0, 1};
    for (int n : {1, 3})
      for (MemoryReuse reuse : {MemoryReuse::none, MemoryReuse::s1, MemoryReuse::s2, MemoryReuse::s3, MemoryReuse::s4}) {
        PipelineConfig pipe;
        pipe.partitions = n;
        pipe.reuse = reuse;
        expect_equal(pipelined(pipe), want, std::string(overflow ? "padded, overflow " : "padded ") + pipe.describe());
      }
  }
}

// One token per part, top-1: on 2 and 4 ranks some part routes no row at all to some rank (the
// test checks that it happened), and the layer still equals the unpipelined one.
TEST_F(PipelinedLayer, PartsThatRouteNoTokenToSomeRank) {
  if (world->size() < 2) GTEST_SKIP() << "every token goes to the only rank";
  cfg.prototypes = 1;
  cfg.top_k = 1;
  cfg.capacity_factor.reset();
  const Result want = unpipelined();
  for (MemoryReuse reuse : {MemoryReuse::none, MemoryReuse::s1, MemoryReuse::s4}) {
    PipelineConfig pipe;
    pipe.partitions = T;
    pipe.reuse = reuse;
    expect_equal(pipelined(pipe), want, pipe.describe());
  }
  PipelineConfig pipe;
  pipe.partitions = T;
  TrackingAllocator own(dev.backend(), dev.default_stream());
  PipelinedMoELayer layer(cfg, pipe, dev, own, *dispatch_comm, *combine_comm);
  layer.init(7, streams.compute);
  std::vector<float> y(x.size()), dx(x.size());
  test_backend::DeviceMirror d(dev, dev.default_stream());
  PipelinedContext c = layer.forward(d(x), T, d(y), streams);
  int empty = 0;
  for (const auto& p : c.parts) {
    int rows = 0;
    for (int r : p.dispatch->rows_per_expert) rows += r;
    empty += rows == 0;
  }
  layer.backward(c, d(dy), d(dx), streams);
  dev.synchronize();
  int any = 0;
  MPI_Allreduce(&empty, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_GT(any, 0) << "no part left a rank without rows: the case is not covered";
}

TEST_F(PipelinedLayer, FasterMoEStyleEveryGroupSizeEqualsTheUnpipelinedLayer) {
  const Result want = unpipelined();
  const int W = world->size();
  for (int g = 1; g <= W; ++g) {
    if (W % g) continue;
    PipelineConfig pipe;
    pipe.split = PipelineSplit::worker_groups;
    pipe.group_size = g;
    expect_equal(pipelined(pipe), want, pipe.describe());
  }
}

// Two micro-batches alive at once, their backwards reversed: each gets what it gets alone.
TEST_F(PipelinedLayer, TwoMicroBatchesInFlightWithSharedBuffers) {
  PipelineConfig pipe;
  pipe.partitions = 3;
  pipe.reuse = MemoryReuse::s2;
  TrackingAllocator own(dev.backend(), dev.default_stream());
  PipelinedMoELayer layer(cfg, pipe, dev, own, *dispatch_comm, *combine_comm);
  layer.init(7, streams.compute);
  auto x2 = tokens(T, cfg.hidden, 300, world->rank() * T), dy2 = tokens(T, cfg.hidden, 400, world->rank() * T);
  std::vector<float> y1(x.size()), y2(x.size()), dx1(x.size()), dx2(x.size());
  {
    test_backend::DeviceMirror d(dev, dev.default_stream());
    PipelinedContext c1 = layer.forward(d(x), T, d(y1), streams);
    PipelinedContext c2 = layer.forward(d(x2), T, d(y2), streams);
    layer.backward(c2, d(dy2), d(dx2), streams);
    layer.backward(c1, d(dy), d(dx1), streams);
    dev.synchronize();
    d.sync();
  }
  const Result first = pipelined(pipe);
  EXPECT_EQ(y1, first.y);
  EXPECT_EQ(dx1, first.dx);
  std::swap(x, x2);
  std::swap(dy, dy2);
  const Result second = pipelined(pipe);
  EXPECT_EQ(y2, second.y);
  EXPECT_EQ(dx2, second.dx);
}

TEST(PipelineConfig, BadInputNamesTheOption) {
  PipelineConfig p;
  p.partitions = 0;
  EXPECT_EQ(p.validate(16, 4)->rfind("--partitions:", 0), 0u);
  p.partitions = 17;
  EXPECT_EQ(p.validate(16, 4)->rfind("--partitions:", 0), 0u);
  p.partitions = 16;
  EXPECT_FALSE(p.validate(16, 4));
  p.split = PipelineSplit::worker_groups;
  p.group_size = 3;
  EXPECT_EQ(p.validate(16, 4)->rfind("--group-size:", 0), 0u);
  p.group_size = 2;
  EXPECT_FALSE(p.validate(16, 4));
  p.reuse = MemoryReuse::s1;
  EXPECT_EQ(p.validate(16, 4)->rfind("--strategy:", 0), 0u);
  EXPECT_EQ(parse_reuse("S3"), MemoryReuse::s3);
  EXPECT_FALSE(parse_reuse("S5"));
  EXPECT_EQ(token_split(13, 4), (std::vector<int>{0, 4, 7, 10, 13}));
}

}  // namespace moebench
