// The experts' streams route (--expert-gemm streams): one GEMM per expert, handed round-robin to
// a few side streams that run at once (on the GPU each with its own cuBLAS handle; on the CPU
// each with its own worker), forked from and joined back into the caller's stream with events,
// so that small per-expert GEMMs overlap instead of queueing one behind the other. Whatever the
// caller's stream does next -- release a buffer to its pool, read a gradient -- comes after
// every side stream's GEMMs.
#include <string>
#include "kernels/grouped_gemm.h"
#include "moe/experts.h"

namespace moebench {

constexpr int kExpertSideStreams = 4;

void Experts::run_on_side_streams(const std::vector<GemmArgs>& problems, const Stream& s) {
  if (side_.empty())
    for (int i = 0; i < kExpertSideStreams; ++i) side_.push_back(dev_.create_stream("experts." + std::to_string(i)));
  Event forked(dev_.backend());
  forked.record(s);
  std::vector<bool> used(side_.size(), false);
  std::size_t next = 0;
  for (const GemmArgs& g : problems) {
    if (g.m == 0 || g.n == 0) continue;
    const std::size_t j = next++ % side_.size();
    if (!used[j]) forked.make_wait(side_[j]);
    used[j] = true;
    grouped_gemm(dev_.exec(side_[j]), {g}, ExpertGemm::serial, nullptr, 0);
  }
  for (std::size_t j = 0; j < side_.size(); ++j) {
    if (!used[j]) continue;
    Event done(dev_.backend());
    done.record(side_[j]);
    done.make_wait(s);
  }
}

}  // namespace moebench
