// cuBLAS is opened when a CUDA device opens, never at process start: a run on the CPU backend
// neither opens nor maps it, and the build's toolkit provides every entry point the suite calls.
#include <gtest/gtest.h>
#include <link.h>
#include <string>
#include <vector>
#include "moe/dispatcher.h"
#include "moe_test_util.h"
#if MOEBENCH_WITH_CUDA
#include "kernels/cublas_library.h"
#endif

using namespace moebench;
using namespace moebench::testing_util;

namespace {
// The loaded objects whose file names contain `part`.
std::vector<std::string> mapped(const std::string& part) {
  std::pair<std::string, std::vector<std::string>> found{part, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        auto& names = *static_cast<std::pair<std::string, std::vector<std::string>>*>(out);
        if (info->dlpi_name && std::string(info->dlpi_name).find(names.first) != std::string::npos)
          names.second.push_back(info->dlpi_name);
        return 0;
      },
      &found);
  return found.second;
}
}  // namespace

TEST(CublasLibrary, ACpuRunNeitherOpensNorMapsIt) {
#if MOEBENCH_WITH_CUDA
  if (cublas_opened()) GTEST_SKIP() << "an earlier test in this process opened cuBLAS (ctest runs this one alone)";
#endif
  MoEConfig c;
  c.hidden = 16;
  c.ffn = 24;
  c.experts = 4;
  CpuLayer L(c, testing_util::local_dispatcher);
  const auto x = tokens(12, c.hidden, 3);
  L.forward(x);
  L.backward(x);
  EXPECT_EQ(mapped("libcublas"), std::vector<std::string>{});
#if MOEBENCH_WITH_CUDA
  EXPECT_FALSE(cublas_opened());
#endif
}

#if MOEBENCH_WITH_CUDA
TEST(CublasLibrary, OpensTheBuildsToolkitWithEveryEntryPoint) {
  const CublasLibrary& lib = cublas();
  EXPECT_TRUE(cublas_opened());
  EXPECT_EQ(mapped("libcublasLt").size(), 1u);
  EXPECT_EQ(mapped("libcublas.").size(), 1u);
  const void* entries[] = {
      reinterpret_cast<const void*>(lib.create), reinterpret_cast<const void*>(lib.destroy),
      reinterpret_cast<const void*>(lib.set_stream), reinterpret_cast<const void*>(lib.set_workspace),
      reinterpret_cast<const void*>(lib.gemm_ex), reinterpret_cast<const void*>(lib.gemm_grouped_batched_ex),
      reinterpret_cast<const void*>(lib.status_string), reinterpret_cast<const void*>(lib.lt_create),
      reinterpret_cast<const void*>(lib.lt_destroy), reinterpret_cast<const void*>(lib.lt_matmul),
      reinterpret_cast<const void*>(lib.lt_matmul_algo_check),
      reinterpret_cast<const void*>(lib.lt_matmul_algo_get_heuristic),
      reinterpret_cast<const void*>(lib.lt_matmul_desc_create),
      reinterpret_cast<const void*>(lib.lt_matmul_desc_set_attribute),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_create),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_destroy),
      reinterpret_cast<const void*>(lib.lt_matmul_preference_set_attribute),
      reinterpret_cast<const void*>(lib.lt_matrix_layout_create),
      reinterpret_cast<const void*>(lib.lt_matrix_layout_set_attribute)};
  for (std::size_t i = 0; i < std::size(entries); ++i) EXPECT_NE(entries[i], nullptr) << "entry " << i;
  // Calls that need no GPU reach the library itself: its message for a status, and a descriptor
  // whose attribute it accepts.
  EXPECT_NE(std::string(lib.status_string(CUBLAS_STATUS_NOT_SUPPORTED)).find("not supported"), std::string::npos);
  cublasLtMatrixLayout_t layout = nullptr;
  ASSERT_EQ(lib.lt_matrix_layout_create(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  const std::int32_t batch = 3;
  EXPECT_EQ(lib.lt_matrix_layout_set_attribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(&cublas(), &lib);  // opened once
}
#endif
