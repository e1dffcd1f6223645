// Unit tests of phub/base/realtime.hpp: the policy of a thread, and when a poller at real-time priority
// would spin.
#include "phub/base/realtime.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace phub {
namespace {

const RealtimePolicy kFifo10{SCHED_FIFO, 10};

TEST(Realtime, NoPolicyNoRefusal) {
  EXPECT_EQ(realtime_polling_refusal(std::nullopt, 0, "x"), "");
  EXPECT_EQ(realtime_polling_refusal(std::nullopt, 1, "x"), "");
}

TEST(Realtime, BusyPollingIsRefusedUnlessTheCpuIsItsOwn) {
  const std::string r = realtime_polling_refusal(kFifo10, 0, "polling.idle_sleep_us");
  EXPECT_NE(r.find("polling.idle_sleep_us = 0 busy-polls"), std::string::npos) << r;
  EXPECT_NE(r.find("SCHED_FIFO 10"), std::string::npos) << r;
  EXPECT_EQ(realtime_polling_refusal(kFifo10, 0, "polling.idle_sleep_us", /*cpu_is_its_own=*/true), "");
}

TEST(Realtime, NapsUnderTheFloorAreRefusedAtTheFloorTaken) {
  const std::string r = realtime_polling_refusal(kFifo10, kRealtimeMinNapUs - 1, "--idle-sleep-us");
  EXPECT_NE(r.find("--idle-sleep-us = 19 us is shorter than the 20 us"), std::string::npos) << r;
  EXPECT_EQ(realtime_polling_refusal(kFifo10, kRealtimeMinNapUs, "--idle-sleep-us"), "");
  // A nap is never refused for the CPU: a short nap spins whoever else is on it.
  EXPECT_NE(realtime_polling_refusal(RealtimePolicy{SCHED_RR, 5}, 1, "n", true), "");
}

TEST(Realtime, Describe) {
  EXPECT_EQ(describe(kFifo10), "SCHED_FIFO 10");
  EXPECT_EQ(describe(RealtimePolicy{SCHED_RR, 3}), "SCHED_RR 3");
}

// A thread put under SCHED_FIFO reads it back, and back under SCHED_OTHER reads none (the tests run as root).
TEST(Realtime, SetAndReadBackOnAThread) {
  std::thread t([] {
    EXPECT_FALSE(realtime_policy_of_this_thread().has_value());
    auto set = set_policy_of_this_thread(kFifo10);
    ASSERT_TRUE(set.has_value()) << set.error();
    const auto now = realtime_policy_of_this_thread();
    ASSERT_TRUE(now.has_value());
    EXPECT_EQ(now->policy, SCHED_FIFO);
    EXPECT_EQ(now->priority, 10);
    ASSERT_TRUE(set_policy_of_this_thread(std::nullopt).has_value());
    EXPECT_FALSE(realtime_policy_of_this_thread().has_value());
  });
  t.join();
}

TEST(Realtime, AnImpossiblePriorityIsNamed) {
  std::thread t([] {
    auto set = set_policy_of_this_thread(RealtimePolicy{SCHED_FIFO, 1000});
    ASSERT_FALSE(set.has_value());
    EXPECT_NE(set.error().find("SCHED_FIFO 1000"), std::string::npos) << set.error();
  });
  t.join();
}

}  // namespace
}  // namespace phub
