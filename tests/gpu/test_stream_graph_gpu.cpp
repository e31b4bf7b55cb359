// Graphs on the GPU (runtime/stream_graph.h): a captured fork and join of GEMMs on two streams
// replays to the eager result, allocating nothing and leaving the buffers outside the graph
// alone; a host wait inside a capture is an error that leaves the stream usable; the GPT step
// captured and replayed equals the same number of eager steps. Skipped where there is no GPU.
#include "gpu/gpu_test_util.h"
#include "kernels/gemm.h"
#include "gpt/gpt_trainer.h"
#include "comm/comm.h"
#include "runtime/watchdog.h"
#include "runtime/runtime.h"
#include "runtime/stream_graph.h"

namespace moebench {
using namespace gputest;

TEST(GpuStreamGraph, AForkAndJoinOfGemmsReplaysToTheEagerResult) {
  MOEBENCH_REQUIRE_GPU(dev);
  dev.set_tensor_cores(false);
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  const int n = 256;
  const auto x = random_rounded(std::size_t(n) * n, DType::f32, 1), w = random_rounded(std::size_t(n) * n, DType::f32, 2);
  std::vector<float> y(std::size_t(n) * n), want(std::size_t(n) * n);
  gemm_cpu(dense_gemm(false, false, n, n, n, x.data(), w.data(), y.data()));
  gemm_cpu(dense_gemm(false, false, n, n, n, y.data(), w.data(), want.data()));
  Buffer dx = upload(dev, alloc, x, DType::f32), dw = upload(dev, alloc, w, DType::f32);
  Buffer z = alloc.allocate(x.size() * 4, MemTag::activations, a);
  dev.synchronize();
  void* scratch_at = nullptr;
  StreamGraph graph(alloc, a, [&] {
    Buffer dy = alloc.allocate(x.size() * 4, MemTag::temporary, a);
    scratch_at = dy.data();
    gemm(dev.exec(a), dense_gemm(false, false, n, n, n, dx.data(), dw.data(), dy.data()));
    Event fork(Backend::cuda), join(Backend::cuda);
    fork.record(a);
    fork.make_wait(b);  // b joins the capture
    gemm(dev.exec(b), dense_gemm(false, false, n, n, n, dy.data(), dw.data(), z.data()));
    dy.record_stream(b);
    join.record(b);
    join.make_wait(a);
  });
  EXPECT_GE(graph.nodes(), 2u);
  Buffer outside = alloc.allocate(x.size() * 4, MemTag::temporary, a);
  EXPECT_NE(outside.data(), scratch_at) << "the graph's block was handed to work outside it";
  dev.fill_zero(outside.data(), outside.bytes(), a);
  for (int k = 0; k < 3; ++k) {
    dev.fill_zero(z.data(), z.bytes(), a);
    const std::int64_t blocks = alloc.system_allocations();
    graph.replay(a);
    a.synchronize();
    EXPECT_EQ(alloc.system_allocations(), blocks) << "a replay allocated";
    EXPECT_LT(rel_l2(download(dev, alloc, z, want.size(), DType::f32), want), 1e-5) << "replay " << k;
  }
  EXPECT_EQ(download(dev, alloc, outside, 4, DType::f32), std::vector<float>(4, 0.f)) << "a replay wrote outside its graph";
}

TEST(GpuStreamGraph, AHostWaitInsideACaptureFailsItAndLeavesTheStreamUsable) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  Stream a = dev.create_stream("a");
  Buffer x = alloc.allocate(1024, MemTag::temporary, a);
  EXPECT_THROW(StreamGraph(alloc, a, [&] {
                 dev.fill_zero(x.data(), x.bytes(), a);
                 a.synchronize();
               }),
               Error);
  EXPECT_FALSE(a.capturing());
  dev.fill_zero(x.data(), x.bytes(), a);
  a.synchronize();
}

// Tensor cores off and fp32, so that both trainers run the same GEMMs; equal within the sums'
// order (some kernels accumulate with atomics).
TEST(GpuStreamGraph, ReplaysOfTheCapturedGptStepAreEagerSteps) {
  MOEBENCH_REQUIRE_GPU(dev);
  dev.set_tensor_cores(false);
  Watchdog::set_timeout(60.0);  // a wait that hangs ends the test
  auto world = make_world_communicator(*Runtime::current(), Backend::cuda);
  const ModelShape shape{.layers = 2, .hidden = 64, .ffn = 256, .heads = 4, .seq = 24, .vocab = 97};
  const ParallelLayout layout = ParallelLayout::of(LayoutKind::dense, 1, 1, 1);
  GptTrainer eager(*world, dev, Backend::cuda, layout, layout_model(shape, layout), 2, 1);
  GptTrainer captured(*world, dev, Backend::cuda, layout, layout_model(shape, layout), 2, 1);
  for (int k = 0; k < 4; ++k) eager.step();
  captured.capture_step();
  for (int k = 0; k < 3; ++k) captured.step();
  const double want = eager.loss_sum(), got = captured.loss_sum();
  EXPECT_NEAR(got, want, 1e-5 * std::abs(want));
  TrackingAllocator alloc(Backend::cuda, dev.default_stream());
  const auto pe = eager.parameters(), pc = captured.parameters();
  ASSERT_EQ(pe.size(), pc.size());
  for (std::size_t i = 0; i < pe.size(); ++i) {
    const std::size_t count = pe[i].weight->bytes() / 4;
    EXPECT_LT(rel_l2(download(dev, alloc, *pc[i].weight, count, DType::f32), download(dev, alloc, *pe[i].weight, count, DType::f32)),
              1e-5)
        << "parameter " << i;
  }
}

}  // namespace moebench
