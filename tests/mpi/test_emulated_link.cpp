// The emulated link (comm/comm.h) op by op, at whatever world size mpirun gives (CTest: 1, 2
// and 4 ranks): every operation -- all_reduce, reduce_scatter, all_gather, all_to_all,
// all_to_all_v, send, recv, send_recv -- takes at least latency + bus bytes / bandwidth for the
// bytes it really moved (nccl-tests' bus bytes, computed here from the counts, not read from
// the runtime), and not much more (>= 0.9 of the time is the link's when nothing else waits);
// collectives asleep overlap other streams; duplicates of one link share its wire.
#include <gtest/gtest.h>
#include <chrono>
#include <functional>
#include <thread>
#include "comm/comm.h"
#include "runtime/device.h"
#include "timeline_util.h"
#include "test_backend.h"

namespace moebench {
using namespace testing_util;

namespace {

class EmulatedLinkOps : public test_backend::WorldTest<test_backend::WorldOf::mpi> {};

// One operation as this rank runs it: what it enqueues, and its bus bytes by the formulas.
struct LinkCase {
  std::string name;      // the timeline's op name
  double bus_bytes = 0;  // what the link must carry
  std::function<void(Communicator&, const Stream&)> enqueue;
};

}  // namespace

TEST_F(EmulatedLinkOps, EveryOperationWaitsForTheBytesItMoved) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "link times under ThreadSanitizer's slowdown mean nothing";
#endif
  EmulatedLink link;
  // 2 MB on the bus: 40 ms, far above MPI's own time here; 5 ms of latency, so a loaded machine's
  // late wake-up (a scheduler tick or two) stays inside the 0.9 bound even on one rank.
  link.bandwidth_GBps = 0.05;
  link.latency_us = 5000;
  auto linked = make_mpi_communicator(link);
  // Bus bytes per operation; on one rank there is no bus (the link's latency alone), so little data.
  const double target = n > 1 ? 2e6 : 4096;
  const double f = 4;         // fp32
  const std::size_t big = std::size_t(target / f);
  std::vector<float> a(big * n + 16, 1.f), b(big * n + 16, 0.f);
  auto count_for = [&](double factor) { return factor > 0 ? std::size_t(target / f / factor) : big; };

  std::vector<LinkCase> cases;
  {  // all_reduce: 2 (n-1)/n of the buffer
    const std::size_t c = count_for(2.0 * (n - 1) / n);
    cases.push_back({"all_reduce (mpi)", 2.0 * (n - 1) / n * c * f, [&, c](Communicator& m, const Stream& s) {
                       m.all_reduce(a.data(), b.data(), c, DType::f32, ReduceOp::sum, s);
                     }});
  }
  {  // reduce_scatter, all_gather, all_to_all: (n-1) blocks
    const std::size_t c = count_for(n - 1);
    cases.push_back({"reduce_scatter (mpi)", double(n - 1) * c * f, [&, c](Communicator& m, const Stream& s) {
                       m.reduce_scatter(a.data(), b.data(), c, DType::f32, ReduceOp::sum, s);
                     }});
    cases.push_back({"all_gather (mpi)", double(n - 1) * c * f, [&, c](Communicator& m, const Stream& s) {
                       m.all_gather(a.data(), b.data(), c, DType::f32, s);
                     }});
    cases.push_back({"all_to_all (mpi)", double(n - 1) * c * f, [&, c](Communicator& m, const Stream& s) {
                       m.all_to_all(a.data(), b.data(), c, DType::f32, s);
                     }});
  }
  {  // all_to_all_v, uneven: rank q sends (1 + (2 q + p) % n) units to rank p; the bus carries the
     // larger of what this rank sends to and receives from the others
    const std::size_t unit = std::size_t(target / f / std::max(1, n * (n - 1)));
    std::vector<std::size_t> sc(n), sd(n), rc(n), rd(n);
    double sent = 0, received = 0;
    for (int p = 0; p < n; ++p) {
      sc[p] = unit * (1 + (2 * r + p) % n);
      rc[p] = unit * (1 + (2 * p + r) % n);
      sd[p] = p ? sd[p - 1] + sc[p - 1] : 0;
      rd[p] = p ? rd[p - 1] + rc[p - 1] : 0;
      if (p != r) {
        sent += double(sc[p]) * f;
        received += double(rc[p]) * f;
      }
    }
    cases.push_back({"all_to_all_v (mpi)", std::max(sent, received), [&, sc, sd, rc, rd](Communicator& m, const Stream& s) {
                       m.all_to_all_v(a.data(), sc, sd, b.data(), rc, rd, DType::f32, s);
                     }});
  }
  if (n >= 2) {  // send_recv in a ring; send and recv between pairs (even to odd, then back)
    cases.push_back({"send_recv (mpi)", double(big) * f, [&](Communicator& m, const Stream& s) {
                       m.send_recv(a.data(), (r + 1) % n, b.data(), (r - 1 + n) % n, big, DType::f32, s);
                     }});
    const int peer = r ^ 1;
    if (peer < n) {
      cases.push_back({r % 2 ? "recv (mpi)" : "send (mpi)", double(big) * f, [&, peer](Communicator& m, const Stream& s) {
                         if (r % 2) m.recv(b.data(), big, DType::f32, peer, s); else m.send(a.data(), big, DType::f32, peer, s);
                       }});
      cases.push_back({r % 2 ? "send (mpi)" : "recv (mpi)", double(big) * f, [&, peer](Communicator& m, const Stream& s) {
                         if (r % 2) m.send(a.data(), big, DType::f32, peer, s); else m.recv(b.data(), big, DType::f32, peer, s);
                       }});
    }
  }

  Device dev = Device::open(Backend::cpu);
  Stream s = dev.create_stream("link");
  for (const LinkCase& c : cases) {
    const double want_us = link.latency_us + c.bus_bytes / (link.bandwidth_GBps * 1e3);
    double best_us = 1e300;
    for (int rep = 0; rep < 5; ++rep) {
      world->barrier(dev.default_stream());  // the ranks start together: a late peer is not the link
      RecordedTimeline recording(r);
      c.enqueue(*linked, s);
      s.synchronize();
      std::vector<TimelineEntry> ops;
      for (const TimelineEntry& e : recording.entries())
        if (!e.range && e.track == s.id && e.name == c.name) ops.push_back(e);
      ASSERT_EQ(ops.size(), 1u) << c.name;
      const double took = ops[0].end_us - ops[0].start_us;
      EXPECT_GE(took, want_us) << c.name << " on " << n << " ranks ended before the link could carry its "
                               << c.bus_bytes << " bus bytes";
      best_us = std::min(best_us, took);
    }
    EXPECT_GE(want_us / best_us, 0.9) << c.name << " on " << n << " ranks: " << best_us << " us against the link's "
                                      << want_us << " us: the emulation waits too long (a double wait, a late wake-up)";
  }
}

// On an emulated link an operation takes no less than latency + bus bytes / bandwidth, asleep:
// a collective on one stream and a sleep (standing in for compute) on another overlap.
TEST_F(EmulatedLinkOps, ACollectiveAsleepOverlapsOtherStreams) {
  if (n < 2) GTEST_SKIP() << "a link needs two ranks";
  auto slow = make_mpi_communicator(EmulatedLink{0.01, 50.0});  // 10 MB/s
  EXPECT_EQ(slow->link(), "emulated: 0.01 GB/s, 50 us");
  Device dev = Device::open(Backend::cpu);
  Stream sc = dev.create_stream("comm"), sx = dev.create_stream("compute");
  const std::size_t count = 500000 / 4;  // 500 KB all-reduce: 2 (n-1)/n x 500 KB on the bus
  std::vector<float> x(count, 1.f), y(count);
  const double want_s = 50e-6 + 2.0 * (n - 1) / n * 500000 / 1e7;
  const auto t0 = std::chrono::steady_clock::now();
  slow->all_reduce(x.data(), y.data(), count, DType::f32, ReduceOp::sum, sc);
  slow->wait(sc);
  const double alone = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(alone, want_s);
  EXPECT_LT(alone, want_s * 1.5 + 0.02);
  EXPECT_EQ(y[0], float(n));
  const auto t1 = std::chrono::steady_clock::now();
  slow->all_reduce(x.data(), y.data(), count, DType::f32, ReduceOp::sum, sc);
  run_on(sx, "compute", [want_s] { std::this_thread::sleep_for(std::chrono::duration<double>(want_s)); });
  dev.synchronize();
  const double both = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_LT(both, 1.5 * want_s + 0.02) << "alone " << alone;
}

// Communicators duplicated from one emulated link share its wire: two collectives in flight at
// once on two of them take as long as both one after the other; on two separate links they
// overlap.
TEST_F(EmulatedLinkOps, DuplicatesOfOneLinkShareItsBandwidth) {
  if (n < 2) GTEST_SKIP() << "a link needs two ranks";
  Device dev = Device::open(Backend::cpu);
  Stream s1 = dev.create_stream("one"), s2 = dev.create_stream("two");
  const std::size_t count = 500000 / 4;
  std::vector<float> x(count, 1.f), y1(count), y2(count);
  const double each_s = 2.0 * (n - 1) / n * 500000 / 1e7;  // at 10 MB/s
  auto both_ms = [&](Communicator& a, Communicator& b) {
    const auto t0 = std::chrono::steady_clock::now();
    a.all_reduce(x.data(), y1.data(), count, DType::f32, ReduceOp::sum, s1);
    b.all_reduce(x.data(), y2.data(), count, DType::f32, ReduceOp::sum, s2);
    dev.synchronize();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto link = make_mpi_communicator(EmulatedLink{0.01, 0.0});
  auto shared = link->dup();
  const double together = both_ms(*link, *shared);
  EXPECT_GE(together, 2 * each_s);
  auto own = make_mpi_communicator(EmulatedLink{0.01, 0.0});
  const double apart = both_ms(*link, *own);
  EXPECT_LT(apart, 1.5 * each_s + 0.02) << "shared " << together;
  EXPECT_EQ(y1[0], float(n));
  EXPECT_EQ(y2[0], float(n));
}

}  // namespace moebench
