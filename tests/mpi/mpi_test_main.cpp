// gtest main for tests run under mpirun: MPI around the tests (with MPI_THREAD_MULTIPLE, as
// communication runs on stream worker threads) and the Runtime on it, output from rank 0 only,
// and a failure on any rank fails every rank's exit code. With MOEBENCH_TEST_BACKEND=cuda only
// the suites written for either backend run (kEitherBackend); the run names the others.
#include <gtest/gtest.h>
#include <algorithm>
#include <mpi.h>
#include <string>
#include <utility>
#include <vector>
#include "comm/nccl_order.h"
#include "runtime/runtime.h"
#include "runtime/watchdog.h"
#include "test_backend.h"

namespace {

// The suites that take their backend from MOEBENCH_TEST_BACKEND (tests/mpi/test_backend.h); each
// name is checked against the suites' sources (CTest mpi.either_backend_suites). The others stay
// on the cpu backend: the MPI communicator's own mechanisms (NCCL's order, the emulated link, the
// ring reduce-scatter), the suites that read the CPU timeline (the schedules' and the pipelined
// layer's mechanism), and the stages written as host code (the pipeline engine's MLP, the
// deadlock test's scale stage, the phased micro-batches).
const char* const kEitherBackend =
    "MpiComm.*:MoEDistributed.*:MoELayouts.*:TensorParallelBlock.*:DataParallel.*:GptPipeline.*:PipelinedLayer.*:"
    "PipelineConfig.*:StepGraph.*";

// In NCCL's order (MOEBENCH_MPI_AS_NCCL=1), a communicator used from several streams is where the
// order of issue can deadlock or serialize what was meant to overlap. Each such use was reviewed,
// and is listed here by its streams (in alphabetical order) with the reason it is safe; any other fails the run, naming
// the test, the communicator and its streams, until it is reviewed too.
const std::vector<std::pair<std::string, const char*>> kReviewed = {
    {"compute, send", "the pipeline engine: each direction's communicator receives on compute and sends on send, and "
                      "along one direction every stage issues a micro-batch's receive before its send"},
    {"compute, dispatch", "the pipelined MoE layer: S on dispatch; the gate gradient's all-reduce on compute is issued "
                          "after the backward's last S, which waits for nothing issued later"},
    {"comm, compute, default", "MicroBatches' phased dispatchers driven by hand: the reference on the default stream "
                               "completes before the phases are issued"},
};

// A stream that carried several communicators' operations queues one behind the other: ranks that
// issue them in different orders deadlock on NCCL. Each stream that did, by its name, with the
// reason its order is the same on every rank.
const std::vector<std::pair<std::string, const char*>> kReviewedCarriers = {
    {"compute", "the pipeline engine: a stage receives from both neighbours on compute, the forward direction's "
                "communicator from the one before and the backward's from the one after, in its schedule's table order, "
                "and each receive's sender issues that send before anything that waits on the receiving stage "
                "(PipelineDeadlock runs every schedule with messages above NCCL's buffer)"},
    {"send", "the pipeline engine: a stage sends both directions on send, each after the compute it carries, in the "
             "same table order as its receives"},
    {"two", "EmulatedLinkOps: one all-reduce of each communicator per stream, issued in the same order on every rank"},
};

struct UnreviewedStreams : ::testing::EmptyTestEventListener {
  int found = 0;
  void OnTestStart(const ::testing::TestInfo&) override { moebench::forget_communicator_streams(); }
  void OnTestEnd(const ::testing::TestInfo& t) override {
    // A stream carrying several communicators, keyed by the stream's name ("<stream>: ...").
    report(t, moebench::streams_with_several_communicators(), kReviewedCarriers,
           [](const std::string& use) { return use.substr(0, use.find(':')); },
           "a stream carrying these communicators is not among the reviewed carriers");
    // A communicator used from several streams, keyed by its streams ("<label>: a, b").
    report(t, moebench::communicators_on_several_streams(), kReviewed,
           [](const std::string& use) { return use.substr(use.rfind("): ") + 3); },
           "a communicator used from these streams is not among the reviewed uses");
  }

  // Counts and names each use whose key no reviewed entry has.
  template <class Key>
  void report(const ::testing::TestInfo& t, const std::vector<std::string>& uses,
              const std::vector<std::pair<std::string, const char*>>& reviewed, Key key, const char* why) {
    for (const std::string& use : uses) {
      const std::string k = key(use);
      if (std::any_of(reviewed.begin(), reviewed.end(), [&](const auto& r) { return r.first == k; })) continue;
      ++found;
      std::fprintf(stderr, "%s.%s: %s: %s (tests/mpi/mpi_test_main.cpp)\n", t.test_suite_name(), t.name(), use.c_str(), why);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "MPI_THREAD_MULTIPLE is not available (got %d)\n", provided);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  ::testing::InitGoogleTest(&argc, argv);
  moebench::Runtime runtime(argc, argv, "moebench tests");  // on the MPI above; NCCL bootstraps over it
  try {
    if (moebench::test_backend::backend() == moebench::Backend::cuda) {
      GTEST_FLAG_SET(filter, std::string(kEitherBackend));
      if (runtime.rank() == 0)
        std::printf("on cuda: the suites written for either backend (%s); the others run on the cpu backend only\n",
                    kEitherBackend);
    }
  } catch (const moebench::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  auto* unreviewed = new UnreviewedStreams;
  ::testing::UnitTest::GetInstance()->listeners().Append(unreviewed);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  moebench::Watchdog::set_identity("moebench tests", rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0 || unreviewed->found ? 1 : 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed) std::fprintf(stderr, "rank %d: tests failed\n", rank);
  MPI_Finalize();
  return any;
}
