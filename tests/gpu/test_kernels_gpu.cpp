// Every CUDA kernel against its CPU reference, in each dtype, with a tolerance scaled by the
// dtype's rounding (TF32 for fp32 GEMMs on tensor cores). Skipped where there is no GPU.
#include <algorithm>
#include "gpu/gpu_test_util.h"
#include "comm/comm.h"
#include "runtime/watchdog.h"
#include "runtime/runtime.h"
#include "kernels/adam.h"
#include "kernels/bf16_split.h"
#include "kernels/gelu.h"
#include "kernels/gemm.h"

namespace moebench {
using namespace gputest;

TEST(GpuGemm, MatchesCpuInEveryDtypeTransposeAndMathMode) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const int m = 96, n = 80, k = 128;
  for (DType t : {DType::f32, DType::f16, DType::bf16})
    for (bool tc : {true, false})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const auto a = random_rounded(std::size_t(m) * k, t, 11), b = random_rounded(std::size_t(k) * n, t, 12);
          std::vector<float> want(std::size_t(m) * n);
          gemm_cpu(dense_gemm(ta, tb, m, n, k, a.data(), b.data(), want.data()));
          Buffer da = upload(dev, alloc, a, t), db = upload(dev, alloc, b, t);
          Buffer dc = upload(dev, alloc, std::vector<float>(want.size(), NAN), t);  // poisoned output
          dev.set_tensor_cores(tc);
          gemm(dev.exec(dev.default_stream()), dense_gemm(ta, tb, m, n, k, da.data(), db.data(), dc.data(), t));
          const auto got = download(dev, alloc, dc, want.size(), t);
          const double eps = (t == DType::f32 && tc) ? kTf32Epsilon : dtype_epsilon(t);
          EXPECT_LT(rel_l2(got, want), 4 * eps + 1e-6)
              << dtype_name(t) << " tensor_cores=" << tc << " ta=" << ta << " tb=" << tb;
        }
}

TEST(GpuGelu, ForwardAndBackwardMatchCpu) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const std::size_t n = 100003;  // not a multiple of the block size, nor of four
  // offset 0: sixteen bytes a load (then a tail); 1: arrays not aligned for it, one at a time; 4:
  // 16-bit arrays 8-byte aligned only (one at a time), fp32 ones aligned. The backward also in
  // place (dx = dy), as the padded experts run it.
  for (std::size_t offset : {0, 1, 4})
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const auto x = random_rounded(n + offset, t, 5, 2.f), dy = random_rounded(n + offset, t, 6);
    std::vector<float> y(n), dx(n);
    gelu_forward_cpu(x.data() + offset, y.data(), n);
    gelu_backward_cpu(x.data() + offset, dy.data() + offset, dx.data(), n);
    Buffer dxv = upload(dev, alloc, x, t), ddy = upload(dev, alloc, dy, t), in_place = upload(dev, alloc, dy, t);
    Buffer dyv = upload(dev, alloc, std::vector<float>(n + offset, NAN), t);
    Buffer ddx = upload(dev, alloc, std::vector<float>(n + offset, NAN), t);
    const std::size_t skip = offset * dtype_size(t);
    const Exec ex = dev.exec(dev.default_stream());
    gelu_forward(ex, dxv.as<char>() + skip, dyv.as<char>() + skip, n, t);
    gelu_backward(ex, dxv.as<char>() + skip, ddy.as<char>() + skip, ddx.as<char>() + skip, n, t);
    gelu_backward(ex, dxv.as<char>() + skip, in_place.as<char>() + skip, in_place.as<char>() + skip, n, t);
    const auto tail = [&](const Buffer& b) {
      const auto all = download(dev, alloc, b, n + offset, t);
      return std::vector<float>(all.begin() + offset, all.end());
    };
    const double tol = 2 * dtype_epsilon(t) + 1e-6;
    EXPECT_LT(rel_l2(tail(dyv), y), tol) << dtype_name(t) << " offset " << offset;
    EXPECT_LT(rel_l2(tail(ddx), dx), tol) << dtype_name(t) << " offset " << offset;
    EXPECT_LT(rel_l2(tail(in_place), dx), tol) << dtype_name(t) << " offset " << offset << " in place";
  }
}

// GeLU's gradient over the padded experts' rows: as the CPU computes it on those rows, sixteen
// bytes a load (width 16) and one element at a time (width 13), an expert with no rows, one in
// the overflow, and more experts than one launch takes; the padding rows keep what they held.
TEST(GpuGelu, TheGradientInBlocksMatchesCpuAndLeavesThePadding) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  std::vector<int> rows(300);
  for (std::size_t e = 0; e < rows.size(); ++e) rows[e] = int((e * 7) % 5);  // 0 .. 4
  rows[1] = 9;  // over the blocks' 4: in the overflow
  for (int width : {16, 13})
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    const RowPadding p{row_offsets(rows), 4, width, t};
    const std::vector<std::size_t> start = padded_starts(p.offset, p.padded);
    const std::size_t n = start.back() * std::size_t(width);
    std::vector<char> expert_row(start.back(), 0);
    for (int e = 0; e < p.experts(); ++e) std::fill_n(expert_row.begin() + start[e], p.rows(e), 1);
    const auto x = random_rounded(n, t, 5, 2.f);
    std::vector<float> d = random_rounded(n, t, 6);
    for (std::size_t i = 0; i < n; ++i)
      if (!expert_row[i / width]) d[i] = 7.f;  // padding: a mark
    std::vector<float> want = d;
    gelu_backward_in_blocks(Exec{}, RowPadding{p.offset, p.padded, width, DType::f32}, x.data(), want.data());
    Buffer dx = upload(dev, alloc, x, t), dd = upload(dev, alloc, d, t);
    gelu_backward_in_blocks(dev.exec(dev.default_stream()), p, dx.data(), dd.data());
    const auto got = download(dev, alloc, dd, n, t);
    std::size_t kept = 0, padding = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (!expert_row[i / width]) ++padding, kept += got[i] == 7.f;
    EXPECT_GT(padding, 0u);
    EXPECT_EQ(kept, padding) << dtype_name(t) << " width " << width << ": padding written";
    EXPECT_LT(rel_l2(got, want), 2 * dtype_epsilon(t) + 1e-6) << dtype_name(t) << " width " << width;
  }
}

// The bf16 gate's parts and the sum of its slices: the host's, bit for bit.
TEST(GpuBf16Split, PartsAndSlicesEqualTheHostsBitForBit) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const int rows = 37, cols = 33;
  const auto w = random_rounded(std::size_t(rows) * cols, DType::f32, 41, 3.f);
  const Bf16Parts parts{4, {0, 1, 2, 0}};
  std::vector<std::uint16_t> want(std::size_t(rows) * 4 * cols);
  split_bf16_cpu(w.data(), rows, cols, parts, want.data());
  Buffer dw = upload(dev, alloc, w, DType::f32), dparts = alloc.allocate(want.size() * 2, MemTag::temporary);
  const Exec ex = dev.exec(dev.default_stream());
  split_bf16(ex, dw.as<float>(), rows, cols, parts, dparts.data());
  std::vector<float> want_values(want.size());
  for (std::size_t i = 0; i < want.size(); ++i) want_values[i] = from_bits16(DType::bf16, want[i]);
  EXPECT_EQ(download(dev, alloc, dparts, want.size(), DType::bf16), want_values);
  const auto slices = random_rounded(std::size_t(rows) * 3 * cols, DType::f32, 42);
  std::vector<float> sum(std::size_t(rows) * cols);
  sum_split3_cpu(slices.data(), rows, cols, sum.data());
  Buffer dslices = upload(dev, alloc, slices, DType::f32), dsum = alloc.allocate(sum.size() * 4, MemTag::temporary);
  sum_split3(ex, dslices.as<float>(), rows, cols, dsum.as<float>());
  EXPECT_EQ(download(dev, alloc, dsum, sum.size(), DType::f32), sum);
}

TEST(GpuConvert, RoundsExactlyLikeTheHost) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const auto x = random_rounded(4099, DType::f32, 9, 100.f);  // four at a time, then three one at a time
  for (DType t : {DType::f16, DType::bf16}) {
    Buffer d = upload(dev, alloc, x, t);
    const auto got = download(dev, alloc, d, x.size(), t);
    for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(got[i], round_to(t, x[i])) << dtype_name(t) << " " << x[i];
  }
}

TEST(GpuAllocator, TrackedBytesAgreeWithCudaMemGetInfo) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const std::size_t bytes = std::size_t(256) << 20;
  Buffer b = alloc.allocate(bytes, MemTag::activations);
  const auto delta = alloc.device_used_delta();
  ASSERT_TRUE(delta.has_value());
  EXPECT_GE(*delta, std::int64_t(bytes));
  EXPECT_LT(*delta, std::int64_t(bytes + (std::size_t(64) << 20)));
  EXPECT_EQ(alloc.current(MemTag::activations), bytes);
  EXPECT_FALSE(dev.info().name.empty());
  EXPECT_FALSE(dev.info().driver.empty());
}

TEST(GpuNccl, WorldOfOneCollectivesAndEventsWork) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  Watchdog::set_timeout(60.0);  // a wait that hangs ends the test
  auto comm = make_world_communicator(*Runtime::current(), Backend::cuda);
  if (comm->size() != 1) GTEST_SKIP() << "run at world size 1";
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  Buffer in = upload(dev, alloc, x, DType::f32), out = upload(dev, alloc, std::vector<float>(8, 0.f), DType::f32);
  const Stream& s = dev.default_stream();
  Event start(Backend::cuda, EventUse::timing), stop(Backend::cuda, EventUse::timing);
  start.record(s);
  comm->all_reduce(in.data(), out.data(), 8, DType::f32, ReduceOp::sum, s);
  stop.record(s);
  comm->wait(s);
  EXPECT_GE(Event::elapsed_ms(start, stop), 0.0);
  EXPECT_EQ(download(dev, alloc, out, 8, DType::f32), x);
  comm->all_to_all(in.data(), out.data(), 8, DType::f32, s);
  comm->barrier(s);
  EXPECT_EQ(download(dev, alloc, out, 8, DType::f32), x);
  EXPECT_EQ(comm->split(0, 0)->size(), 1);
}

// AdamW on the GPU: fp32 master, moments and the model copy in each dtype, the gradient in the
// model's dtype or in fp32 (summed over a data-parallel group) and scaled, against the CPU step.
TEST(GpuAdam, MatchesCpuWithAModelCopyInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const std::size_t n = 70001;  // four at a time, then one; from element 1, all one at a time
  for (std::size_t first : {0, 1})
  for (DType t : {DType::f32, DType::f16, DType::bf16})
  for (DType grad_t : {t, DType::f32}) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " weights, " + std::string(dtype_name(grad_t)) + " gradient, from element " +
                 std::to_string(first));
    auto master = random_rounded(n, t, 31), m = random_rounded(n, DType::f32, 32, 0.1f);
    auto v = random_rounded(n, DType::f32, 33, 0.1f);
    for (auto& x : v) x = x * x;
    const auto g = random_rounded(n, grad_t, 34);
    AdamStep a;
    a.lr = 1e-2f; a.step = 7;
    a.grad_scale = grad_t == t ? 1.f : 0.25f;
    Buffer dmaster = upload(dev, alloc, master, DType::f32), dm = upload(dev, alloc, m, DType::f32),
           dv = upload(dev, alloc, v, DType::f32), dg = upload(dev, alloc, g, grad_t);
    Buffer model = t == DType::f32 ? Buffer{} : upload(dev, alloc, std::vector<float>(n, NAN), t);
    void* out = t == DType::f32 ? dmaster.data() : model.data();
    auto at = [first](void* p, DType d) { return static_cast<char*>(p) + first * dtype_size(d); };
    adam_step(dev.exec(dev.default_stream()), n - first, a, dmaster.as<float>() + first, dm.as<float>() + first,
              dv.as<float>() + first, at(dg.data(), grad_t), grad_t, at(out, t), t);
    adam_step_cpu(n - first, a, master.data() + first, m.data() + first, v.data() + first, g.data() + first);
    EXPECT_LT(rel_l2(download(dev, alloc, dmaster, n, DType::f32), master), 1e-6) << dtype_name(t);
    EXPECT_LT(rel_l2(download(dev, alloc, dm, n, DType::f32), m), 1e-6) << dtype_name(t);
    if (t != DType::f32) {
      std::vector<float> rounded = master, got = download(dev, alloc, model, n, t);
      round_to(t, rounded.data(), n);
      if (first) got[0] = rounded[0];  // not updated, so not written: still NaN
      EXPECT_LT(rel_l2(got, rounded), dtype_epsilon(t)) << dtype_name(t);
    }
  }
}

}  // namespace moebench
