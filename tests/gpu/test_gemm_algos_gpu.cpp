// How the strided-batched GEMM picks cuBLASLt's algorithm (kernels/batched_gemm_cuda.cu): timed
// among the heuristic's candidates at a shape's first call that may run twice, never at a call
// that accumulates (beta 1), is captured into a graph or runs while kernels are logged, and
// the bucket's plan taken over by its other shapes with no heuristic of their own; each call's
// result stays the CPU reference's.
// CUDA only: skipped where there is no GPU.
#include <string>
#include "gpu/gpu_test_util.h"
#include "kernels/batched_gemm.h"
#include "runtime/kernel_log.h"
#include "runtime/stream_graph.h"

namespace moebench {
using namespace gputest;

namespace {
// X W1-like: experts' P rows, bf16, shapes no other test uses (fresh plans and buckets). Every
// batch stride is a multiple of 256 bytes whatever P is, as the experts' are (P x 1024 rows), so
// the shapes of a bucket share their alignments.
struct ExpertGemmShape {
  Device& dev;
  TrackingAllocator& alloc;
  int batch = 4, P = 0, n = 384, k = 256;
  std::vector<float> a, b, c;
  Buffer da, db, dc;

  ExpertGemmShape(Device& d, TrackingAllocator& al, int rows, unsigned seed) : dev(d), alloc(al), P(rows) {
    a = random_rounded(std::size_t(batch) * P * k, DType::bf16, seed);
    b = random_rounded(std::size_t(batch) * k * n, DType::bf16, seed + 1);
    c = random_rounded(std::size_t(batch) * P * n, DType::bf16, seed + 2);
    da = upload(dev, alloc, a, DType::bf16), db = upload(dev, alloc, b, DType::bf16), dc = upload(dev, alloc, c, DType::bf16);
  }
  BatchedGemmArgs args(const void* pa, const void* pb, void* pc, DType t, float beta) const {
    return strided_batch(dense_gemm(false, false, P, n, k, pa, pb, pc, t, 1.f, beta), batch, (long long)P * k,
                         (long long)k * n, (long long)P * n);
  }
  void run(const Stream& s, float beta) { batched_gemm(dev.exec(s), args(da.data(), db.data(), dc.data(), DType::bf16, beta)); }
  // The CPU's C = AB + beta C on the host copies, then C on the device against it.
  void expect_matches(float beta, const std::string& what) {
    batched_gemm_cpu(args(a.data(), b.data(), c.data(), DType::f32, beta));
    EXPECT_LT(rel_l2(download(dev, alloc, dc, c.size(), DType::bf16), c), 4 * dtype_epsilon(DType::bf16)) << what;
  }
};

BatchedGemmAlgoStats since(const BatchedGemmAlgoStats& before) {
  const BatchedGemmAlgoStats now = batched_gemm_algo_stats();
  return {now.plans - before.plans, now.timed - before.timed, now.reused - before.reused, now.lone - before.lone};
}
}  // namespace

TEST(GpuGemmAlgos, TimedOncePerBucketNeverWhenAccumulatingAndEveryResultExact) {
  MOEBENCH_REQUIRE_GPU(dev);
  if (dev.backend() != Backend::cuda) GTEST_SKIP() << "times cuBLASLt's algorithms: CUDA only";
  dev.set_tensor_cores(true);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const Stream& s = dev.default_stream();
  ExpertGemmShape first(dev, alloc, 200, 11);  // bucket of 193..256 rows
  BatchedGemmAlgoStats at = batched_gemm_algo_stats();
  first.run(s, 1.f);  // trial runs here would add A B to C again and again
  first.expect_matches(1.f, "a shape's first call, accumulating");
  BatchedGemmAlgoStats d = since(at);
  EXPECT_EQ(d.plans, 1u);
  ASSERT_EQ(d.lone, 0u) << "cuBLASLt offered one algorithm: nothing here would be timed";
  EXPECT_EQ(d.timed, 0u) << "an accumulating call was timed";

  first.run(s, 0.f);
  first.expect_matches(0.f, "its first overwriting call, timed");
  d = since(at);
  EXPECT_EQ(d.plans, 1u);
  EXPECT_EQ(d.timed, 1u) << "the first call that may run twice was not timed";
  first.run(s, 0.f);
  EXPECT_EQ(since(at).timed, 1u) << "a timed shape was timed again";

  ExpertGemmShape next(dev, alloc, 231, 21);  // the same bucket: another step's busiest expert
  at = batched_gemm_algo_stats();
  next.run(s, 0.f);
  next.expect_matches(0.f, "a shape taking its bucket's plan");
  d = since(at);
  EXPECT_EQ(d.plans, 0u) << "a shape of a known bucket called the heuristic";
  EXPECT_EQ(d.reused, 1u);
  EXPECT_EQ(d.timed, 0u) << "a shape in a timed bucket was timed";
  // Back to the first shape on the same plan: its descriptors must take its extents again.
  first.run(s, 0.f);
  first.expect_matches(0.f, "the bucket's first shape after another");
  next.run(s, 0.f);
  next.expect_matches(0.f, "the other shape again");
  EXPECT_EQ(since(at).reused, 1u) << "a shape already checked against its bucket's algorithm was checked again";
}

TEST(GpuGemmAlgos, NotTimedInsideAGraphCaptureOrWhileKernelsAreLogged) {
  MOEBENCH_REQUIRE_GPU(dev);
  if (dev.backend() != Backend::cuda) GTEST_SKIP() << "times cuBLASLt's algorithms: CUDA only";
  dev.set_tensor_cores(true);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  Stream a = dev.create_stream("a");
  ExpertGemmShape captured(dev, alloc, 300, 31);  // bucket 257..320
  dev.synchronize();
  BatchedGemmAlgoStats at = batched_gemm_algo_stats();
  // Timing inside the capture would wait on the host: the capture would fail.
  StreamGraph graph(alloc, a, [&] { captured.run(a, 0.f); });
  EXPECT_EQ(since(at).timed, 0u);
  graph.replay(a);
  a.synchronize();
  captured.expect_matches(0.f, "the captured call replayed");
  captured.run(a, 0.f);  // eager now: timed
  a.synchronize();
  captured.expect_matches(0.f, "the same shape eager");
  EXPECT_EQ(since(at).timed, 1u);

  ExpertGemmShape logged(dev, alloc, 400, 41);  // bucket 385..448
  at = batched_gemm_algo_stats();
  if (const std::string why = KernelLog::start(Backend::cuda); !why.empty())
    GTEST_SKIP() << "the capture is checked; no kernel log here (" << why << ")";
  logged.run(a, 0.f);
  a.synchronize();
  const std::vector<KernelRecord> kernels = KernelLog::stop();
  logged.expect_matches(0.f, "a call while kernels are logged");
  EXPECT_EQ(since(at).timed, 0u) << "trial runs would be logged as the step's kernels";
  EXPECT_LE(kernels.size(), 2u) << "more than one GEMM (and its split-K reduction) was logged for one call";
}

}  // namespace moebench
