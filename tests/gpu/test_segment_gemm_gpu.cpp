// The segment GEMMs' tensor-core kernel and the device offsets against their CPU references:
// fp16 and bf16, both forms, both B layouts, both epilogues, beta 0 and 1, segments of no rows,
// one row, odd counts, one far above the mean and taller than a tile, widths that are not
// multiples of the tile, and rows past the last bound left untouched. Skipped where there is no GPU.
#include <cmath>
#include <numeric>
#include <string>
#include "gpu/gpu_test_util.h"
#include "kernels/segment_gemm.h"
#include "kernels/segment_offsets.h"

namespace moebench {
using namespace gputest;

namespace {
std::vector<std::int32_t> offsets_of(const std::vector<int>& rows) {
  std::vector<std::int32_t> o(rows.size() + 1, 0);
  for (std::size_t e = 0; e < rows.size(); ++e) o[e + 1] = o[e] + rows[e];
  return o;
}
}  // namespace

TEST(GpuSegmentGemm, BothFormsMatchCpuWithEmptyOddAndHotSegments) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const std::vector<int> rows = {0, 1, 37, 300, 0, 129, 8};  // 300 and 129: more than a 128-row tile
  const int S = int(rows.size()), h = 72, f = 200;              // neither a multiple of the tile
  const auto offset = offsets_of(rows);
  const std::size_t R = std::size_t(offset.back()), bound = R + 5;
  Buffer doff = alloc.allocate(offset.size() * 4, MemTag::buffers);
  dev.copy_to_device(doff.data(), offset.data(), offset.size() * 4, dev.default_stream());
  struct Case {
    const char* name;
    SegmentForm form;
    bool tb;
    int m, n, k;
    Epilogue epilogue;
    float beta;
  };
  for (const Case& cs : {Case{"X W1, GeLU epilogue", SegmentForm::rows, false, 0, f, h, Epilogue::gelu_aux, 0.f},
                         Case{"A W2", SegmentForm::rows, false, 0, h, f, Epilogue::none, 0.f},
                         Case{"dY W2^T, GeLU' epilogue", SegmentForm::rows, true, 0, f, h, Epilogue::dgelu, 0.f},
                         Case{"dH W1^T", SegmentForm::rows, true, 0, h, f, Epilogue::none, 0.f},
                         Case{"A^T dY, beta 0", SegmentForm::weights, false, f, h, 0, Epilogue::none, 0.f},
                         Case{"X^T dH, beta 1", SegmentForm::weights, false, h, f, 0, Epilogue::none, 1.f}})
    for (DType t : {DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(cs.name) + " " + std::string(dtype_name(t)));
      const bool by_rows = cs.form == SegmentForm::rows;
      const std::size_t a_width = by_rows ? cs.k : cs.m, b_count = by_rows ? std::size_t(S) * cs.k * cs.n : bound * cs.n,
                        c_count = by_rows ? bound * cs.n : std::size_t(S) * cs.m * cs.n;
      const auto a = random_rounded(bound * a_width, t, 61), b = random_rounded(b_count, t, 62);
      auto c = random_rounded(c_count, t, 63), aux = random_rounded(by_rows ? bound * cs.n : 0, t, 64);
      if (by_rows) std::fill(c.begin() + R * cs.n, c.end(), 7.f);  // rows past the bounds: must stay 7
      if (cs.beta == 0.f && !by_rows) std::fill(c.begin(), c.end(), NAN);  // beta 0 must not read C
      SegmentGemmArgs host;
      host.form = cs.form, host.segments = S, host.offset = offset.data(), host.bound = bound;
      host.m = cs.m, host.n = cs.n, host.k = cs.k, host.trans_b = cs.tb, host.beta = cs.beta;
      host.a = a.data(), host.b = b.data(), host.c = c.data();
      host.stride_b = (long long)cs.k * cs.n, host.stride_c = (long long)cs.m * cs.n;
      host.epilogue = cs.epilogue, host.aux = cs.epilogue == Epilogue::none ? nullptr : aux.data();
      Buffer da = upload(dev, alloc, a, t), db = upload(dev, alloc, b, t), dc = upload(dev, alloc, c, t);
      Buffer daux = upload(dev, alloc, cs.epilogue == Epilogue::gelu_aux ? std::vector<float>(aux.size(), NAN) : aux, t);
      SegmentGemmArgs device = host;
      device.offset = doff.as<std::int32_t>(), device.a = da.data(), device.b = db.data(), device.c = dc.data();
      device.aux = host.aux ? daux.data() : nullptr;
      host.dtype = DType::f32;  // the reference on fp32 copies of the rounded values
      segment_gemm_cpu(host);
      device.dtype = t;
      segment_gemm(dev.exec(dev.default_stream()), device);
      const auto got = download(dev, alloc, dc, c.size(), t);
      const double eps = dtype_epsilon(t);
      EXPECT_LT(rel_l2(got, c), 4 * eps + 1e-6);
      if (by_rows) {
        for (std::size_t i = R * cs.n; i < got.size(); ++i) ASSERT_EQ(got[i], 7.f) << "row " << i / cs.n << " written";
      }
      if (cs.epilogue == Epilogue::gelu_aux) {
        auto got_aux = download(dev, alloc, daux, aux.size(), t), want_aux = aux;
        got_aux.resize(R * cs.n), want_aux.resize(R * cs.n);
        EXPECT_LT(rel_l2(got_aux, want_aux), 4 * eps + 1e-6);
      }
    }
}

TEST(GpuSegmentOffsets, MatchCpuOverGroupsAndExpertRanges) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const int G = 3, E = 1100;  // more local experts than the kernel's 1024 threads: two scan rounds
  std::vector<std::int32_t> kept(std::size_t(G) * E);
  for (std::size_t i = 0; i < kept.size(); ++i) kept[i] = std::int32_t((i * 7919) % 13 == 0 ? 0 : (i * 31) % 17);
  Buffer dkept = alloc.allocate(kept.size() * 4, MemTag::buffers);
  dev.copy_to_device(dkept.data(), kept.data(), kept.size() * 4, dev.default_stream());
  for (auto [first, count] : {std::pair{0, E}, std::pair{100, 900}, std::pair{E - 1, 1}}) {
    SCOPED_TRACE("experts " + std::to_string(first) + " + " + std::to_string(count));
    std::vector<std::int32_t> base(kept.size()), offset(count + 1);
    segment_offsets_cpu(SegmentOffsetsArgs{G, E, first, count, kept.data(), base.data(), offset.data()});
    Buffer dbase = alloc.allocate(base.size() * 4, MemTag::buffers), doff = alloc.allocate(offset.size() * 4, MemTag::buffers);
    segment_offsets(dev.exec(dev.default_stream()), SegmentOffsetsArgs{G, E, first, count, dkept.as<std::int32_t>(),
                                                                        dbase.as<std::int32_t>(), doff.as<std::int32_t>()});
    std::vector<std::int32_t> got_base(base.size()), got_offset(offset.size());
    dev.copy_to_host(got_base.data(), dbase.data(), base.size() * 4, dev.default_stream());
    dev.copy_to_host(got_offset.data(), doff.data(), offset.size() * 4, dev.default_stream());
    dev.default_stream().synchronize();
    EXPECT_EQ(got_base, base);
    EXPECT_EQ(got_offset, offset);
  }
}

}  // namespace moebench
