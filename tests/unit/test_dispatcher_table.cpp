// The dispatchers' table (moe/dispatcher_table.h): each row makes a dispatcher of its own name on a
// world of one rank, its experts split over the group its row names, and a name not in the table is
// refused with the ones there are.
#include <gtest/gtest.h>
#include "comm/comm.h"
#include "kernels/exec.h"
#include "moe/dispatcher_table.h"
#include "counting_dispatcher.h"
#include "moe_test_util.h"
#include "runtime/allocator.h"
#include "runtime/device.h"

namespace moebench {
namespace {

TEST(DispatcherTable, EachRowMakesTheDispatcherItNames) {
  auto world = make_self_communicator();
  Device dev = Device::open(Backend::cpu);
  TrackingAllocator alloc(Backend::cpu);
  ASSERT_FALSE(dispatcher_table().empty());
  for (const DispatcherRow& row : dispatcher_table()) {
    const auto d = row.make(DispatcherEnv{testing_util::test_moe_config(4, 1, 1), dev, alloc}, world.get());
    ASSERT_NE(d, nullptr) << row.name;
    EXPECT_EQ(d->name(), row.name);
    EXPECT_EQ(d->local_experts(), 4) << row.name << ": one rank holds every expert";
    // A row that needs the counts on the host says so to the layer as well.
    if (row.needs_host_counts) EXPECT_TRUE(d->reads_host_counts()) << row.name;
  }
}

TEST(DispatcherTable, ExpertsSplitOverTheGroupTheRowNames) {
  EXPECT_EQ(dispatcher_row("local").expert_ranks(8, 2), 1);
  EXPECT_EQ(dispatcher_row("expert_parallel").expert_ranks(8, 2), 8);
  EXPECT_EQ(dispatcher_row("ppmoe").expert_ranks(8, 2), 2);
  EXPECT_TRUE(dispatcher_row("local").one_device());
  EXPECT_TRUE(dispatcher_row("ppmoe").shares_tokens());
  EXPECT_FALSE(dispatcher_row("expert_parallel").shares_tokens());
  EXPECT_EQ(dispatcher_names(), (std::vector<std::string>{"local", "expert_parallel", "ppmoe"}));
}

// A run's dispatchers come from the table: every row by default; with the segmented expert GEMM,
// which keeps the row counts on the device, the rows that need them on the host are left out, and
// one listed is refused naming those allowed.
TEST(DispatcherTable, ARunTakesEveryRowOrThoseItsExpertGemmAllows) {
  std::vector<std::string> all, device, listed = {"local", "expert_parallel"};
  EXPECT_FALSE(pick_dispatchers(all, false));
  EXPECT_EQ(all, dispatcher_names());
  EXPECT_FALSE(pick_dispatchers(device, true));
  EXPECT_EQ(device, (std::vector<std::string>{"local", "ppmoe"}));
  const auto e = pick_dispatchers(listed, true);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("--dispatchers: expert_parallel sizes its exchange from row counts on the host"), std::string::npos) << *e;
  EXPECT_NE(e->find("allowed with it: local, ppmoe"), std::string::npos) << *e;
}

TEST(DispatcherTable, ANameNotInTheTableIsRefusedWithTheOnesThereAre) {
  try {
    dispatcher_row("fastermoe");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no dispatcher 'fastermoe'; there are: local, expert_parallel, ppmoe"),
              std::string::npos)
        << e.what();
  }
}

// A new dispatcher is its file (counting_dispatcher.h, outside moe/), its row and its test: once
// registered, the table's names, a run's default choice and the row's factory hold it, and a layer
// made by the row runs through it and computes what the one-device layer computes. Gone with the
// registration.
TEST(DispatcherTable, ADispatcherOutsideMoeJoinsByItsRowAlone) {
  const std::vector<std::string> before = dispatcher_names();
  {
    DispatcherRegistration added({"counting_local", ExpertsOver::each_rank, false, "the one-device layer, counted",
                                  [](const DispatcherEnv& env, Communicator*) -> std::unique_ptr<TokenDispatcher> {
                                    return std::make_unique<testing_util::CountingDispatcher>(env);
                                  }});
    std::vector<std::string> picked;
    ASSERT_FALSE(pick_dispatchers(picked, false));
    EXPECT_EQ(picked.back(), "counting_local");
    EXPECT_NE(dispatcher_list().find("counting_local"), std::string::npos);
    EXPECT_THROW(DispatcherRegistration again(dispatcher_row("local")), Error);

    const MoEConfig cfg = testing_util::test_moe_config(4, 1, 2);
    auto world = make_self_communicator();
    const DispatcherRow& row = dispatcher_row("counting_local");
    testing_util::CpuLayer counted(cfg, [&](const DispatcherEnv& env) { return row.make(env, world.get()); });
    testing_util::CpuLayer local(cfg, testing_util::local_dispatcher);
    const std::vector<float> x = testing_util::tokens(12, cfg.hidden, 5);
    const int dispatched = testing_util::CountingDispatcher::dispatched();
    counted.forward(x);
    local.forward(x);
    EXPECT_EQ(testing_util::CountingDispatcher::dispatched(), dispatched + 1);
    EXPECT_EQ(counted.y, local.y);
  }
  EXPECT_EQ(dispatcher_names(), before);
}

}  // namespace
}  // namespace moebench
