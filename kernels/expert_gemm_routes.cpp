#include "kernels/expert_gemm_routes.h"

namespace moebench {

const std::vector<ExpertGemmRow>& expert_gemm_table() {
  static const std::vector<ExpertGemmRow> rows = {{ExpertGemm::grouped, "grouped"},
                                                  {ExpertGemm::serial, "serial"},
                                                  {ExpertGemm::padded, "padded"},
                                                  {ExpertGemm::streams, "streams"},
                                                  {ExpertGemm::segmented, "segmented"}};
  return rows;
}

const char* expert_gemm_name(ExpertGemm g) {
  for (const ExpertGemmRow& r : expert_gemm_table())
    if (r.route == g) return r.name;
  return "?";
}

std::vector<std::string> expert_gemm_names() {
  std::vector<std::string> out;
  for (const ExpertGemmRow& r : expert_gemm_table()) out.push_back(r.name);
  return out;
}

std::optional<ExpertGemm> parse_expert_gemm(const std::string& name) {
  for (const ExpertGemmRow& r : expert_gemm_table())
    if (name == r.name) return r.route;
  return std::nullopt;
}

}  // namespace moebench
