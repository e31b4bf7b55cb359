// The MPI communicator in NCCL's order (comm/nccl_order.h), on at least 2 ranks: one
// communicator's operations run in the order the host issued them whatever their streams, a
// pair's first use blocks the host until the peer issues its side, a send completes without its
// receive while its connection's buffer has room for it beside the sends before it, and the
// communicators used from several streams, and the streams that carried several communicators,
// are recorded. CTest runs these with the mode on.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <thread>
#include "comm/comm.h"
#include "runtime/device.h"
#include "comm/eager_sends.h"
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

// Connects ranks 0 and 1 of `comm` (a grouped exchange, which NCCL connects on both sides at
// once); the other ranks do nothing.
void connect_first_pair(Communicator& comm, Device& dev) {
  const int r = comm.rank();
  if (r > 1) return;
  float out = 0, in = 0;
  comm.send_recv(&out, 1 - r, &in, 1 - r, 1, DType::f32, dev.default_stream());
}

// The buffer of rank 0's connection to rank 1 (NCCL's within a node where they share one).
std::size_t first_pair_bytes() { return connection_bytes(MPI_COMM_WORLD)[1]; }

// NCCL connects a pair at its first send and receive, blocking the host that issues either until
// the peer has issued its side: rank 1 issues its receive 300 ms late, and rank 0's send returns
// no sooner. Its next send to rank 1 does not block. (An ungrouped ring of first sends then
// receives therefore never gets past its sends: mpi.nccl_order.ungrouped_ring_stops.)
TEST_F(NcclOrder, APairsFirstSendBlocksTheHostUntilThePeerIssuesItsReceive) {
  const int r = comm->rank();
  Stream s = dev.create_stream("s");
  std::vector<float> buf(4, float(r));
  auto side = comm->dup();  // the barrier's
  side->barrier(dev.default_stream());
  if (r == 0) {
    const auto start = std::chrono::steady_clock::now();
    comm->send(buf.data(), buf.size(), DType::f32, 1, s);
    const double first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(first_ms, 250) << "the first send returned before its peer issued its receive";
    const auto again = std::chrono::steady_clock::now();
    comm->send(buf.data(), buf.size(), DType::f32, 1, s);
    const double second_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - again).count();
    EXPECT_LT(second_ms, 200) << "a connected pair's send blocked its host";
    s.synchronize();
  } else if (r == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    comm->recv(buf.data(), buf.size(), DType::f32, 0, s);
    comm->recv(buf.data(), buf.size(), DType::f32, 0, s);
    s.synchronize();
    EXPECT_EQ(buf.front(), 0.f);
  }
  side->barrier(dev.default_stream());
}

// Over a connected pair, a send that fits the connection's buffer completes once copied, before
// its receive is posted; a second that does not fit beside the first (both 3/4 of the buffer)
// waits until the first is received.
TEST_F(NcclOrder, SendsCompleteWithoutTheirReceivesWhileTheConnectionsBufferHoldsThem) {
  const int r = comm->rank();
  const std::size_t capacity = first_pair_bytes();
  if (capacity < 64) GTEST_SKIP() << "MOEBENCH_MPI_AS_NCCL_EAGER_BYTES leaves no buffer";
  connect_first_pair(*comm, dev);
  const std::size_t count = capacity * 3 / 4 / sizeof(float);
  std::vector<float> first(count, 1.f), second(count, 2.f);
  Stream s = dev.create_stream("s");
  auto side = comm->dup();
  if (r == 0) {
    comm->send(first.data(), count, DType::f32, 1, s);
    Event sent_first(Backend::cpu);
    sent_first.record(s);
    comm->send(second.data(), count, DType::f32, 1, s);
    Event sent_second(Backend::cpu);
    sent_second.record(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(sent_first.query()) << "a send that fits the connection's buffer waited for its receive";
    EXPECT_FALSE(sent_second.query()) << "a send completed though the one before it fills the buffer";
    side->barrier(dev.default_stream());  // rank 1 receives after this
    s.synchronize();
  } else {
    side->barrier(dev.default_stream());
    if (r == 1) {
      comm->recv(first.data(), count, DType::f32, 0, s);
      comm->recv(second.data(), count, DType::f32, 0, s);
      s.synchronize();
      EXPECT_EQ(first.front(), 1.f);
      EXPECT_EQ(second.back(), 2.f);
    }
  }
}

// Run alone (CTest's mpi.nccl_order.ungrouped_ring_stops): each rank sends to the next, then
// receives from the one before, without a group, on a new communicator. NCCL documents this as a
// deadlock: every host waits in its first send for a peer that has not issued its receive. The
// watchdog ends the job, naming that wait.
TEST(NcclOrderDeadlock, DISABLED_AnUngroupedRingOfFirstSendsStopsAtItsSends) {
  auto comm = make_mpi_communicator();
  Device dev = Device::open(Backend::cpu);
  const int r = comm->rank(), n = comm->size();
  Watchdog::set_timeout(3);
  std::vector<float> out(4, float(r)), in(4);
  comm->send(out.data(), out.size(), DType::f32, (r + 1) % n, dev.default_stream());
  comm->recv(in.data(), in.size(), DType::f32, (r + n - 1) % n, dev.default_stream());
  ADD_FAILURE() << "the ring got past its first sends";
}

// A send larger than its connection's buffer has not completed while its receiver has not started
// the receive.
TEST_F(NcclOrder, ALargeSendWaitsForItsReceive) {
  const int r = comm->rank();
  connect_first_pair(*comm, dev);
  const std::size_t count = first_pair_bytes() / sizeof(float) + 1;
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
  // Stream "first" carried both communicators, "second" one.
  const auto carriers = streams_with_several_communicators();
  ASSERT_EQ(carriers.size(), 1u);
  EXPECT_EQ(carriers[0].rfind("first: communicator #", 0), 0u) << carriers[0];
  EXPECT_NE(carriers[0].find("world); communicator #"), std::string::npos) << carriers[0];
  EXPECT_NE(carriers[0].find("dup of #"), std::string::npos) << carriers[0];
}

}  // namespace
}  // namespace moebench
