// The pipeline engine in NCCL's order (comm/nccl_order.h) with messages above NCCL's buffer:
// GPipe, 1F1B and ZB-H1 at 2 and 4 stages finish, and their outputs and gradients are right.
// With one communicator for both directions, 1F1B's steady state deadlocks there: stage s issues
// "send F(j+1)" before "recv B(j)" while stage s+1 issues "send B(j)" before "recv F(j+1)", each
// send waiting for a receive queued behind the other stage's send. The stages are cheap (a scale
// per stage) so that the messages can be 8 MiB; the watchdog ends a hang within its deadline.
#include <gtest/gtest.h>
#include <cmath>
#include <numeric>
#include "pipeline/pipeline_engine.h"
#include "comm/nccl_order.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

constexpr int kWidth = 1024, kRows = 2048, kMicro = 4;  // 8 MiB of fp32 a message

// y = a x; dL/da = sum over the micro-batches of <x, dy>.
class ScaleStage final : public PipelineStage {
 public:
  explicit ScaleStage(float a) : a_(a), held_(kMicro) {}
  int width() const override { return kWidth; }
  void forward(int micro, const void* x, void* y, int rows, const Stream& s) override {
    run_on(s, "scale.fwd", [this, micro, x, y, rows] {
      const float* in = static_cast<const float*>(x);
      auto& keep = held_.at(micro);
      keep.assign(in, in + std::size_t(rows) * kWidth);
      float* out = static_cast<float*>(y);
      if (out)
        for (std::size_t i = 0; i < keep.size(); ++i) out[i] = a_ * keep[i];
    });
  }
  void backward_input(int micro, const void* dy, void* dx, const Stream& s) override {
    run_on(s, "scale.bwd", [this, micro, dy, dx] {
      const float* g = static_cast<const float*>(dy);
      float* out = static_cast<float*>(dx);
      const auto& x = held_.at(micro);
      double dot = 0;
      for (std::size_t i = 0; i < x.size(); ++i) {
        dot += double(x[i]) * g[i];
        out[i] = a_ * g[i];
      }
      pending_dot_[micro] = dot;
    });
  }
  void backward_weight(int micro, const Stream& s) override {
    run_on(s, "scale.wgrad", [this, micro] {
      grad_ += pending_dot_[micro];
      held_.at(micro).clear();
    });
  }
  double grad() const { return grad_; }

 private:
  float a_;
  std::vector<std::vector<float>> held_;
  double pending_dot_[kMicro] = {};
  double grad_ = 0;
};

float scale_of(int stage) { return 1.0f + 0.125f * float(stage); }
float x_at(int j, std::size_t i) { return float((i * 7 + std::size_t(j) * 3) % 11) / 11.0f - 0.5f; }
float g_at(int j, std::size_t i) { return float((i * 5 + std::size_t(j)) % 13) / 13.0f - 0.5f; }

TEST(PipelineDeadlock, GpipeOneFOneBAndZbH1FinishWithMultiMegabyteMessagesInNcclOrder) {
  ASSERT_TRUE(nccl_order_settings().on) << "run with MOEBENCH_MPI_AS_NCCL=1 (CTest sets it)";
  ASSERT_GT(std::size_t(kRows) * kWidth * sizeof(float), nccl_order_settings().eager_bytes)
      << "the messages must be above the eager size, where a send waits for its receive";
  auto world = make_mpi_communicator();
  const int P = world->size(), s = world->rank();
  if (P < 2) GTEST_SKIP() << "one stage sends nothing";
  const double timeout = Watchdog::timeout();
  Watchdog::set_timeout(60);  // a deadlock ends the test here, naming the operation that waits
  Device dev = Device::open(Backend::cpu);
  const std::size_t n = std::size_t(kRows) * kWidth;
  std::vector<std::vector<float>> xs(kMicro, std::vector<float>(n)), gs = xs, ys = xs;
  double dots = 0, prod = 1;
  for (int j = 0; j < kMicro; ++j)
    for (std::size_t i = 0; i < n; ++i) {
      xs[j][i] = x_at(j, i);
      gs[j][i] = g_at(j, i);
      dots += double(xs[j][i]) * gs[j][i];
    }
  for (int t = 0; t < P; ++t) prod *= scale_of(t);
  for (auto kind : {PipelineScheduleKind::gpipe, PipelineScheduleKind::one_f_one_b, PipelineScheduleKind::zb_h1}) {
    const std::string what = schedule_name(kind) + " at " + std::to_string(P) + " stages";
    TrackingAllocator alloc(Backend::cpu);
    ScaleStage stage(scale_of(s));
    std::vector<const void*> in, dy;
    std::vector<void*> out;
    for (int j = 0; j < kMicro; ++j) {
      if (s == 0) in.push_back(xs[j].data());
      if (s == P - 1) {
        std::fill(ys[j].begin(), ys[j].end(), NAN);
        out.push_back(ys[j].data());
        dy.push_back(gs[j].data());
      }
    }
    {
      PipelineEngine engine(stage, *world, dev, alloc, dev.create_stream("compute"), dev.create_stream("send"));
      engine.run(make_pipeline_schedule(kind, P, kMicro), kRows, in, out, dy);
    }
    EXPECT_NEAR(stage.grad(), dots * prod / scale_of(s), 1e-4 * std::abs(dots * prod)) << what << ": dL/da";
    if (s == P - 1)
      for (int j = 0; j < kMicro; ++j)
        for (std::size_t i = 0; i < n; i += 4099)
          ASSERT_NEAR(ys[j][i], prod * xs[j][i], 1e-5) << what << ": output of micro-batch " << j << " at " << i;
  }
  Watchdog::set_timeout(timeout);
}

}  // namespace
}  // namespace moebench
