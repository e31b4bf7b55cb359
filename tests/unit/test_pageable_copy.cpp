// A copy to the host, as CUDA makes it into pageable memory: it waits for its stream, and that
// wait has no deadline of its own. So Device::copy_to_host drains the stream under the deadline
// first; the CPU copy waits without a deadline after that, so that the CPU ranks fail where a
// GPU would hang. The case is the expert-parallel dispatch, which reads its counts back after
// their all-to-all: a peer that stopped leaves that all-to-all waiting, as a NCCL kernel waits,
// with no deadline of its own, and the rank must still end within --comm-timeout.
#include <gtest/gtest.h>
#include <unistd.h>
#include <chrono>
#include <thread>
#include "moe_test_util.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

// Two ranks, the other of which stopped: its all-to-all waits forever on the stream, as a NCCL
// kernel does (nothing on the stream bounds it). Nothing else is reached.
class StoppedPeerCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string kind() const override { return "nccl"; }
  std::string link() const override { return "a peer that stopped"; }
  void all_to_all(const void*, void*, std::size_t, DType, const Stream& s) override {
    run_on(s, "all_to_all (its peer stopped)", [] {
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    });
  }
  void all_to_all_v(const void*, const std::vector<std::size_t>&, const std::vector<std::size_t>&, void*,
                    const std::vector<std::size_t>&, const std::vector<std::size_t>&, DType, const Stream&) override {
    unreached();
  }
  void all_reduce(const void*, void*, std::size_t, DType, ReduceOp, const Stream&) override { unreached(); }
  void all_gather(const void*, void*, std::size_t, DType, const Stream&) override { unreached(); }
  void reduce_scatter(const void*, void*, std::size_t, DType, ReduceOp, const Stream&) override { unreached(); }
  void send(const void*, std::size_t, DType, int, const Stream&) override { unreached(); }
  void recv(void*, std::size_t, DType, int, const Stream&) override { unreached(); }
  void send_recv(const void*, int, void*, int, std::size_t, DType, const Stream&) override { unreached(); }
  void barrier(const Stream&) override { unreached(); }
  void wait(const Stream&) override { unreached(); }
  std::unique_ptr<Communicator> split(int, int) override { unreached(); }
  std::unique_ptr<Communicator> dup() override { unreached(); }

 private:
  [[noreturn]] static void unreached() { throw Error("the dispatch went past its counts' all-to-all"); }
};

TEST(PageableCopyDeathTest, AStoppedPeerDuringTheExpertParallelDispatchEndsTheRankWithinTheDeadline) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::alarm(20);  // a copy that waits forever ends the child by SIGALRM, which fails the test
        Watchdog::set_identity("moebench_test", 0);
        Watchdog::set_timeout(0.5);
        StoppedPeerCommunicator peer;
        MoEConfig cfg;
        cfg.hidden = 8;
        cfg.ffn = 8;
        cfg.experts = 4;
        cfg.top_k = 1;
        testing_util::CpuLayer layer(cfg, [&](const DispatcherEnv& env) { return make_expert_parallel_dispatcher(env, peer); });
        const Stream s = layer.dev.create_stream("layer");  // queued: the all-to-all waits on it, not on the host
        const std::vector<float> x = testing_util::normals(4 * 8, 3);
        std::vector<float> y(x.size());
        layer.layer->forward(x.data(), 4, y.data(), s);
      },
      ::testing::ExitedWithCode(1), "moebench_test: rank 0: error: stream layer synchronize \\(cpu\\) did not complete within 0.5 s");
}

}  // namespace
}  // namespace moebench
