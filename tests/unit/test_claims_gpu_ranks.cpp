// The claims' GPU expressions keep the multi-rank filter of this machine's: a one-GPU run has no
// traffic between devices, so it does not judge a claim about communication. A GPU expression
// that reads one rank says why in the claim's note ("one GPU judges it: ...").
#include <gtest/gtest.h>
#include <string>
#include "models/paper_values.h"
#include "tools/claims/ledger.h"

namespace moebench {
namespace {

TEST(ClaimsGpuRanks, AGpuExpressionReadsSeveralRanksWhereThisMachinesDoes) {
  int kept = 0, one_gpu = 0;
  for (const ClaimSpec& c : read_claim_specs(reference_dir() + "/claims.csv")) {
    if (c.gpu.empty() || c.gpu == "=" || c.local.find("ranks>1") == std::string::npos) continue;
    if (c.gpu.find("ranks>1") != std::string::npos) {
      ++kept;
    } else {
      ++one_gpu;
      EXPECT_NE(c.note.find("one GPU judges it: "), std::string::npos)
          << c.id << ": its GPU expression reads one rank where this machine's reads several, and its note does not "
          << "say why one GPU judges it: " << c.gpu;
    }
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(one_gpu, kept);  // a reason is the exception
}

}  // namespace
}  // namespace moebench
