// The padded expert route's GPU parts against their CPU references: cuBLASLt's strided-batched
// GEMM with the GELU_AUX and DGELU epilogues (every dtype, the transposes the experts use, beta 0
// and 1, an odd row count, k = 0) and the row padding (every copy width the kernel picks, empty
// experts, an expert far above the mean; blocks padded from packed rows or zero-padded in place).
// Skipped where there is no GPU.
#include <string>
#include "gpu/gpu_test_util.h"
#include "kernels/batched_gemm.h"
#include "kernels/pad_rows.h"

namespace moebench {
using namespace gputest;

TEST(GpuBatchedGemm, EpiloguesTransposesAndBetaMatchCpuInEveryDtype) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  const int batch = 5, P = 37, h = 64, f = 96;  // P odd: rows padded to a busiest expert's 37
  struct Shape {
    const char* name;
    bool ta, tb;
    int m, n, k;
    Epilogue epilogue;
    float beta;
  };
  for (const Shape& sh : {Shape{"X W1, GeLU epilogue", false, false, P, f, h, Epilogue::gelu_aux, 0.f},
                          Shape{"dY W2^T, GeLU' epilogue", false, true, P, f, h, Epilogue::dgelu, 0.f},
                          Shape{"A^T dY, beta 1", true, false, f, h, P, Epilogue::none, 1.f},
                          Shape{"X^T dH, beta 0", true, false, h, f, P, Epilogue::none, 0.f},
                          Shape{"no rows at all", true, false, h, f, 0, Epilogue::none, 0.f}})
    for (DType t : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::string(sh.name) + " " + std::string(dtype_name(t)));
      const long long sa = (long long)sh.m * sh.k, sb = (long long)sh.k * sh.n, sc = (long long)sh.m * sh.n;
      const auto a = random_rounded(std::size_t(batch * sa), t, 41), b = random_rounded(std::size_t(batch * sb), t, 42);
      auto c = random_rounded(std::size_t(batch * sc), t, 43), aux = random_rounded(std::size_t(batch * sc), t, 44);
      BatchedGemmArgs host;
      host.g = dense_gemm(sh.ta, sh.tb, sh.m, sh.n, sh.k, a.data(), b.data(), c.data(), t, 1.f, sh.beta);
      host.batch = batch;
      host.stride_a = sa, host.stride_b = sb, host.stride_c = sc;
      host.epilogue = sh.epilogue;
      host.aux = sh.epilogue == Epilogue::none ? nullptr : aux.data();
      Buffer da = upload(dev, alloc, a, t), db = upload(dev, alloc, b, t), dc = upload(dev, alloc, c, t),
             daux = upload(dev, alloc, sh.epilogue == Epilogue::gelu_aux ? std::vector<float>(aux.size(), NAN) : aux, t);
      BatchedGemmArgs device = host;
      device.g.a = da.data(), device.g.b = db.data(), device.g.c = dc.data();
      device.aux = host.aux ? daux.data() : nullptr;
      // The CPU reference on fp32 copies of the rounded values: one rounding of its result.
      host.g.dtype = DType::f32;
      batched_gemm_cpu(host);
      dev.set_tensor_cores(true);
      batched_gemm(dev.exec(dev.default_stream()), device);
      const double eps = t == DType::f32 ? kTf32Epsilon : dtype_epsilon(t);
      EXPECT_LT(rel_l2(download(dev, alloc, dc, c.size(), t), c), 4 * eps + 1e-6);
      if (sh.epilogue == Epilogue::gelu_aux) {
        EXPECT_LT(rel_l2(download(dev, alloc, daux, aux.size(), t), aux), 4 * eps + 1e-6);
      }
    }
}

TEST(GpuPadRows, PaddedBlocksAndBackMatchCpuForEveryCopyWidth) {
  MOEBENCH_REQUIRE_GPU(dev);
  TrackingAllocator alloc(dev.backend(), dev.default_stream());
  // Experts of 3, 0, 40 (the hot one), 1 and 0 rows.
  const std::vector<std::size_t> offset = {0, 3, 3, 43, 44, 44};
  for (int height : {40, 2})  // every expert in its block; experts 0 and 2 in the overflow (one copy each)
    for (auto [t, width] : {std::pair{DType::bf16, 72}, std::pair{DType::f16, 100}, std::pair{DType::f32, 3},
                            std::pair{DType::f16, 5}}) {  // 16-, 8-, 4- and 2-byte copies
      SCOPED_TRACE(std::string(dtype_name(t)) + " width " + std::to_string(width) + ", blocks of " +
                   std::to_string(height));
      const RowPadding p{offset, height, width, t};
      const std::size_t rows = padded_starts(offset, height).back();
      const auto packed = random_rounded(offset.back() * width, t, 51);
      std::vector<float> padded(rows * width, NAN);  // the reference, on fp32 host values
      pad_rows_cpu(RowPadding{offset, height, width, DType::f32}, packed.data(), padded.data(), PadMove::to_padded);
      Buffer dpacked = upload(dev, alloc, packed, t), dpadded = upload(dev, alloc, std::vector<float>(padded.size(), NAN), t);
      Buffer dback = upload(dev, alloc, std::vector<float>(packed.size(), NAN), t);
      const Exec ex = dev.exec(dev.default_stream());
      pad_rows(ex, p, dpacked.data(), dpadded.data());
      unpad_rows(ex, p, dpadded.data(), dback.data());
      EXPECT_EQ(download(dev, alloc, dpadded, padded.size(), t), padded);
      EXPECT_EQ(download(dev, alloc, dback, packed.size(), t), packed);
      // Blocks written in place (a dispatcher's map): the padding rows zeroed, the expert rows kept.
      auto in_place = random_rounded(padded.size(), t, 52);
      Buffer dplace = upload(dev, alloc, in_place, t);
      zero_padding_rows(ex, p, dplace.data());
      pad_rows_cpu(RowPadding{offset, height, width, DType::f32}, nullptr, in_place.data(), PadMove::zero_padding);
      EXPECT_EQ(download(dev, alloc, dplace, in_place.size(), t), in_place);
    }
}

}  // namespace moebench
