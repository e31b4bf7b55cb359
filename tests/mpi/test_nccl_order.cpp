// The MPI communicator in NCCL's order (comm/nccl_order.h), on at least 2 ranks: one
// communicator's operations run in the order the host issued them whatever their streams, a
// small send completes without its receive, a large one only once its receive has started, and
// the communicators used from several streams are recorded. CTest runs these with the mode on.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "comm/comm.h"
#include "runtime/device.h"
#include "comm/nccl_order.h"
#include "runtime/watchdog.h"

namespace moebench {
namespace {

class NcclOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(nccl_order_settings().on) << "run with MOEBENCH_MPI_AS_NCCL=1 (CTest sets it)";
    comm = make_mpi_communicator();
    if (comm->size() < 2) GTEST_SKIP() << "point-to-point order needs 2 ranks";
    saved_timeout = Watchdog::timeout();
    Watchdog::set_timeout(30);  // a deadlock the mode should not have ends the test, naming its operation
  }
  void TearDown() override {
    if (saved_timeout > 0) Watchdog::set_timeout(saved_timeout);
    forget_communicator_streams();  // these tests use several streams on purpose: nothing for the suite's review
  }
  std::unique_ptr<Communicator> comm;
  Device dev = Device::open(Backend::cpu);
  double saved_timeout = 0;
};

// Rank 0 issues send X on stream A, held back behind a host gate, then send Y on stream B. MPI
// would let Y go first; NCCL's order sends X first, so rank 1's first receive gets X.
TEST_F(NcclOrder, OperationsOnTwoStreamsRunInTheOrderTheHostIssuedThem) {
  const int r = comm->rank();
  if (r > 1) return comm->barrier(dev.default_stream());
  Stream a = dev.create_stream("a"), b = dev.create_stream("b");
  std::vector<float> x(16, 1.f), y(16, 2.f), first(16), second(16);
  if (r == 0) {
    auto gate = std::make_shared<std::atomic<bool>>(false);
    run_on(a, "gate", [gate] {
      while (!*gate) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    comm->send(x.data(), x.size(), DType::f32, 1, a);
    comm->send(y.data(), y.size(), DType::f32, 1, b);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // room for Y to pass X, were it allowed to
    *gate = true;
    a.synchronize();
    b.synchronize();
  } else {
    comm->recv(first.data(), first.size(), DType::f32, 0, a);
    comm->recv(second.data(), second.size(), DType::f32, 0, a);
    a.synchronize();
    EXPECT_EQ(first, x) << "the send issued first arrived second";
    EXPECT_EQ(second, y);
  }
  comm->barrier(dev.default_stream());
}

// Each rank sends before it receives, on one stream: small sends complete once copied (NCCL's
// buffer at the peer), so neither waits for the other; were they synchronous, both would.
TEST_F(NcclOrder, ASmallSendCompletesWithoutItsReceive) {
  const int r = comm->rank(), n = comm->size();
  Stream s = dev.create_stream("s");
  const std::size_t count = nccl_order_settings().eager_bytes / sizeof(float);
  ASSERT_GT(count, 0u);
  std::vector<float> out(count, float(r)), in(count, -1.f);
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  comm->send(out.data(), count, DType::f32, next, s);
  comm->recv(in.data(), count, DType::f32, prev, s);
  s.synchronize();
  EXPECT_EQ(in, std::vector<float>(count, float(prev)));
}

// A send above the eager size has not completed while its receiver has not started the receive.
TEST_F(NcclOrder, ALargeSendWaitsForItsReceive) {
  const int r = comm->rank();
  const std::size_t count = nccl_order_settings().eager_bytes / sizeof(float) + 1;
  std::vector<float> buf(count, float(r));
  Stream s = dev.create_stream("s");
  auto side = comm->dup();  // the barrier's: on `comm` it would take its turn behind the send
  if (r == 0) {
    comm->send(buf.data(), count, DType::f32, 1, s);
    Event sent(Backend::cpu);
    sent.record(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(sent.query()) << "the send completed before rank 1 posted its receive";
    side->barrier(dev.default_stream());  // rank 1 receives after this
    s.synchronize();
  } else {
    side->barrier(dev.default_stream());
    if (r == 1) {
      comm->recv(buf.data(), count, DType::f32, 0, s);
      s.synchronize();
      EXPECT_EQ(buf.front(), 0.f);
    }
  }
}

TEST_F(NcclOrder, TheCommunicatorsUsedFromSeveralStreamsAreRecorded) {
  forget_communicator_streams();
  Stream a = dev.create_stream("first"), b = dev.create_stream("second");
  std::vector<float> v(4, 1.f);
  auto other = comm->dup();
  comm->all_reduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, a);
  comm->all_reduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, b);
  other->all_reduce(v.data(), v.data(), v.size(), DType::f32, ReduceOp::sum, a);
  a.synchronize();
  b.synchronize();
  const auto several = communicators_on_several_streams();
  ASSERT_EQ(several.size(), 1u);
  EXPECT_NE(several[0].find("world): first, second"), std::string::npos) << several[0];
}

}  // namespace
}  // namespace moebench
