// Host waits on peers (runtime/peer_wait.h), the path CUDA's stream, event and NCCL waits take,
// exercised on the CPU: a wait past --comm-timeout ends the process through the watchdog, naming
// the rank and the wait, after aborting every registered communicator; a communicator's
// asynchronous error aborts them and fails the wait with its name.
#include <gtest/gtest.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include "runtime/peer_wait.h"

namespace moebench {
namespace {

TEST(PeerWaitDeathTest, AWaitPastTheTimeoutAbortsTheCommunicatorsAndEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog::set_identity("moebench_test", 2);
        Watchdog::set_timeout(0.5);
        register_comm_health(this, CommHealth{[] { return std::string(); },
                                              [] { std::fprintf(stderr, "the communicator was aborted\n"); }});
        wait_for_peers("event synchronize (cuda)", [] { return false; });
      },
      ::testing::ExitedWithCode(1),
      "moebench_test: rank 2: error: event synchronize \\(cuda\\) did not complete within 0.5 s(.|\n)*"
      "the communicator was aborted");
}

// An abort that does not return (NCCL's waiting on a stream other communicators' kernels hold)
// does not keep the process: it ends within the timeout and the watchdog's hard deadline.
TEST(PeerWaitDeathTest, AnAbortThatDoesNotReturnStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        Watchdog::set_identity("moebench_test", 1);
        Watchdog::set_timeout(0.5);
        register_comm_health(this, CommHealth{[] { return std::string(); },
                                              [] { std::this_thread::sleep_for(std::chrono::seconds(60)); }});
        wait_for_peers("stream synchronize (cuda)", [] { return false; });
      },
      ::testing::ExitedWithCode(1),
      "did not complete within 0.5 s(.|\n)*the communicators' abort did not return within 5 s; ended without it");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
            0.5 + Watchdog::kAbortSeconds + 3.0);
}

// Every abort inside one group: the group opens before the first and closes after the last.
TEST(PeerWaitDeathTest, TheAbortsRunInsideOneGroup) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        Watchdog::set_identity("moebench_test", 0);
        Watchdog::set_timeout(0.3);
        static int keys[2];
        for (int& k : keys)
          register_comm_health(&k, CommHealth{[] { return std::string(); }, [] { std::fprintf(stderr, "abort\n"); },
                                              [] { std::fprintf(stderr, "group start\n"); },
                                              [] { std::fprintf(stderr, "group end\n"); }});
        wait_for_peers("event synchronize (cuda)", [] { return false; });
      },
      ::testing::ExitedWithCode(1), "group start\nabort\nabort\ngroup end\n");
}

TEST(PeerWait, AnAsynchronousErrorAbortsTheCommunicatorsAndFailsTheWaitByName) {
  std::atomic<int> polls{0}, aborted{0};
  const int key = 0;
  const double timeout = Watchdog::timeout();
  Watchdog::set_timeout(20);  // a wait that missed the error ends here, not at CTest's deadline
  register_comm_health(&key, CommHealth{[&] { return ++polls >= 3 ? std::string("peer 1 went away") : std::string(); },
                                        [&] { ++aborted; }});
  try {
    wait_for_peers("stream synchronize (cuda)", [] { return false; });
    ADD_FAILURE() << "the wait ended without an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "stream synchronize (cuda): a communicator failed: peer 1 went away");
  }
  EXPECT_EQ(aborted.load(), 1);
  EXPECT_EQ(comm_async_error(), "") << "an aborted communicator stays registered";
  unregister_comm_health(&key);
  Watchdog::set_timeout(timeout);
}

TEST(PeerWait, AWaitThatEndsInTimeLeavesTheCommunicatorsAlone) {
  std::atomic<int> aborted{0}, polls{0};
  const int key = 0;
  register_comm_health(&key, CommHealth{[] { return std::string(); }, [&] { ++aborted; }});
  wait_for_peers("stream synchronize (cuda)", [&] { return ++polls > 5; });
  EXPECT_EQ(aborted.load(), 0);
  EXPECT_EQ(Watchdog::watched(), 0);
  unregister_comm_health(&key);
}

}  // namespace
}  // namespace moebench
