// The routes an MoE layer's expert GEMMs take, as a table: each route's name (what --expert-gemm
// takes) and what it runs. The layer (moe/experts*.cpp) runs them; every program takes the names
// from here. A new route is its kernels, its row here, its branch in the layer and its tests.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace moebench {

// serial: one GEMM call after another. grouped: one grouped call (cuBLAS's grouped batched GEMM;
// on the CPU the serial calls). padded: the experts' rows padded to the busiest expert's and one
// strided-batched GEMM per step, GeLU in the GEMMs' epilogues (moe/experts_padded.cpp). streams:
// one GEMM per expert, spread round-robin over side streams that run at once
// (moe/expert_streams.cpp). segmented: one segment GEMM per step whose row counts stay on the
// device (kernels/segment_gemm.h, moe/experts_segmented.cpp).
enum class ExpertGemm { serial, grouped, padded, streams, segmented };

struct ExpertGemmRow {
  ExpertGemm route;
  const char* name;
};
const std::vector<ExpertGemmRow>& expert_gemm_table();
const char* expert_gemm_name(ExpertGemm g);
std::vector<std::string> expert_gemm_names();  // in the table's order
std::optional<ExpertGemm> parse_expert_gemm(const std::string& name);

}  // namespace moebench
