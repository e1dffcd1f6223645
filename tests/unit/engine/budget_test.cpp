// The memory budget (pure): the reservation EAL arguments give, what a config needs, and the refusal.
#include "phub/engine/budget.hpp"

#include <gtest/gtest.h>

#include "phub/config/load.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kHuge = 2 * kMiB;
constexpr uint64_t kSmall = 4096;

std::optional<uint64_t> no_hugepages() { return std::nullopt; }

Reservation reserve(std::vector<std::string> args, std::function<std::optional<uint64_t>()> free_bytes = no_hugepages) {
  auto r = reservation_from_eal_args(args, free_bytes);
  if (!r) {
    ADD_FAILURE() << r.error();
    return Reservation{};
  }
  return *r;
}

TEST(Reservation, SocketMemSumsItsSockets) {
  EXPECT_EQ(reserve({"-l", "0-2", "--socket-mem", "4096,0"}).bytes, 4096 * kMiB);
  EXPECT_EQ(reserve({"--socket-mem=0,1500"}).bytes, 1500 * kMiB);
  EXPECT_EQ(reserve({"--socket-mem", "512,512,512,512"}).bytes, 2048 * kMiB);
  EXPECT_EQ(reserve({"--socket-mem", "1024"}).source, "--socket-mem 1024");
}

TEST(Reservation, MemoryOptionInBothSpellings) {
  EXPECT_EQ(reserve({"-m", "512"}).bytes, 512 * kMiB);
  EXPECT_EQ(reserve({"-m512"}).bytes, 512 * kMiB);
  // The EAL has no --memory: it is not read as a size (the EAL refuses it at start).
  EXPECT_FALSE(reserve({"--memory", "300"}).fixed);
  EXPECT_EQ(reserve({"--no-huge", "--no-pci", "-m", "256"}).source, "--no-huge -m 256");
  // The last one counts, as in the EAL's own parsing.
  EXPECT_EQ(reserve({"-m", "100", "-m", "200"}).bytes, 200 * kMiB);
}

TEST(Reservation, NoHugeWithoutSizeIsTheEalDefault) {
  EXPECT_EQ(reserve({"--no-huge", "--no-pci"}).bytes, 64 * kMiB);
}

TEST(Reservation, NothingFixedMeansTheFreeHugepages) {
  const auto two_gib = [] { return std::optional<uint64_t>(2048 * kMiB); };
  const Reservation r = reserve({"-l", "0-3", "--file-prefix", "t"}, two_gib);
  EXPECT_EQ(r.bytes, 2048 * kMiB);
  EXPECT_FALSE(r.fixed);
  EXPECT_TRUE(reserve({"-m", "512"}).fixed);
  EXPECT_NE(r.source.find("free hugepages"), std::string::npos) << r.source;
  const Reservation none = reserve({"-l", "0-3"});
  EXPECT_EQ(none.bytes, 0u);
  EXPECT_NE(none.source.find("no hugepages"), std::string::npos) << none.source;
}

TEST(Reservation, SizesThatAreNotNumbersAreRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--socket-mem", "4G"}, {"--socket-mem", "1024,,0"}, {"--socket-mem", ""},
        {"-m", "lots"}, {"-m", "-5"}, {"-m", "1e3"}}) {
    auto r = reservation_from_eal_args(args, no_hugepages);
    ASSERT_FALSE(r.has_value()) << args[0] << " " << (args.size() > 1 ? args[1] : "");
    EXPECT_NE(r.error().find("eal_args"), std::string::npos) << r.error();
  }
}

// Sizes whose bytes do not fit 64 bits (or come near) are refused, not wrapped round to a small reservation.
TEST(Reservation, SizesTooLargeForTheArithmeticAreRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-m", "17592186044416"},  // 2^44 MiB: 2^64 bytes, 0 once wrapped
        {"-m", "18446744073709551615"}, {"--socket-mem", "17592186044416,1024"},
        {"--socket-mem", "1099511627776,1099511627776"}}) {  // 2^40 MiB each, over the limit together
    auto r = reservation_from_eal_args(args, no_hugepages);
    ASSERT_FALSE(r.has_value()) << args[1] << ": " << r->bytes;
    EXPECT_NE(r.error().find("at most"), std::string::npos) << r.error();
  }
  // The limit itself is accepted, and counted exactly.
  EXPECT_EQ(reserve({"-m", "1099511627776"}).bytes, 1ull << 60);
}

config::Config default_config() {
  auto cfg = config::load_string(config::embedded_default(), "phub.lua");
  if (!cfg) {
    ADD_FAILURE() << cfg.error();
    return config::Config{};
  }
  return *cfg;
}

uint64_t item(const MemoryBudget& b, std::string_view prefix) {
  for (const auto& i : b.items) {
    if (i.what.starts_with(prefix)) return i.bytes;
  }
  ADD_FAILURE() << "no item " << prefix;
  return 0;
}

TEST(Budget, PoolsFollowTheirMbufsAndRoom) {
  const MbufPoolPlan small{"rx0", 1023, 2176, 32, 256};
  MbufPoolPlan twice = small;
  twice.mbufs = 2047;
  const uint64_t a = mbuf_pool_bytes(small, kHuge), b = mbuf_pool_bytes(twice, kHuge);
  // At least the mbuf, its private area and its room per object; the mempool's own header and caches on top.
  EXPECT_GE(a, 1023ull * (128 + 32 + 2176));
  EXPECT_LT(a, 1023ull * (128 + 32 + 2176 + 128) + 4 * kMiB);
  EXPECT_NEAR(static_cast<double>(b - a), 1024.0 * (128 + 32 + 2176), 1024.0 * 128 + 64 * 1024);
}

TEST(Budget, NoObjectCrossesAPage) {
  // A 2.3 KiB mbuf on 4 KiB pages takes a page of its own; a 10.4 KiB one takes three pages.
  const MbufPoolPlan rx{"rx0", 1023, 2176, 32, 256};
  const MbufPoolPlan jumbo{"rx0", 1023, 10368, 32, 256};
  const uint64_t header_and_ring = mbuf_pool_bytes(MbufPoolPlan{"x", 1023, 0, 0, 256}, 0) - 1023ull * 192;
  EXPECT_GE(mbuf_pool_bytes(rx, kSmall), 1023 * kSmall);
  EXPECT_LT(mbuf_pool_bytes(rx, kSmall), 1023 * kSmall + header_and_ring + 4096);
  EXPECT_GE(mbuf_pool_bytes(jumbo, kSmall), 1023 * 3 * kSmall);
  EXPECT_LT(mbuf_pool_bytes(jumbo, kSmall), 1023 * 3 * kSmall + header_and_ring + 4096);
  // On 2 MiB pages, 2 MiB / 2.4 KiB objects share each page: under 0.2 % lost.
  EXPECT_LT(mbuf_pool_bytes(rx, kHuge), mbuf_pool_bytes(rx, 0) * 1002 / 1000);
}

TEST(Reservation, PagesAreSmallOnlyWithoutHugepages) {
  EXPECT_EQ(reserve({"--no-huge", "-m", "512"}).page_bytes, kSmall);
  EXPECT_EQ(reserve({"--no-huge"}).page_bytes, kSmall);
  EXPECT_EQ(reserve({"--socket-mem", "1024"}).page_bytes, kHuge);
  EXPECT_EQ(reserve({"-m", "1024"}).page_bytes, kHuge);
}

TEST(Budget, EmbeddedDefaultFitsItsOwnReservation) {
  const config::Config cfg = default_config();
  auto r = reservation_from_eal_args(cfg.eal_args, no_hugepages);
  ASSERT_TRUE(r.has_value()) << r.error();
  auto b = memory_budget(cfg, r->page_bytes);
  ASSERT_TRUE(b.has_value()) << b.error();
  EXPECT_EQ(budget_refusal(*b, *r), "") << b->describe();
  EXPECT_GT(item(*b, "job state"), 0u);
  EXPECT_GT(item(*b, "mbuf pools"), static_cast<uint64_t>(cfg.limits.mbufs) * 2048);
}

TEST(Budget, GrowsWithMbufsMtuAndJobs) {
  const config::Config cfg = default_config();
  const uint64_t base = memory_budget(cfg, kHuge)->total_bytes();
  config::Config more = cfg;
  more.limits.mbufs = cfg.limits.mbufs * 2 + 1;
  // The default has one port: its RX pool and the copy pool hold frame-sized mbufs.
  ASSERT_EQ(cfg.ports.size(), 1u);
  EXPECT_GT(memory_budget(more, kHuge)->total_bytes(), base + static_cast<uint64_t>(cfg.limits.mbufs) * 2048 * 2);
  config::Config jumbo = cfg;
  for (auto& p : jumbo.ports) p.mtu = 9000;
  EXPECT_GT(item(*memory_budget(jumbo, kHuge), "mbuf pools"), static_cast<uint64_t>(cfg.limits.mbufs) * 9000 * 2);
  config::Config bigger = cfg;
  bigger.jobs[0].keys.push_back({"extra", 4'000'000});
  EXPECT_GT(item(*memory_budget(bigger, kHuge), "job state"), item(*memory_budget(cfg, kHuge), "job state") + 4'000'000ull * 4);
}

// A hand-off ring of limits.ring_entries (a power of two) has that many slots of one pointer: doubling the
// entries adds that much per ring, and there is a ring from each lcore to each other one.
TEST(Budget, HandOffRingsHoldRingEntriesSlots) {
  config::Config cfg = default_config();
  while (cfg.lcores.size() < 3) cfg.lcores.push_back({static_cast<unsigned>(cfg.lcores.size() + 1), {}});
  cfg.limits.ring_entries = 4096;
  const uint64_t small = item(*memory_budget(cfg, kHuge), "hand-off and request rings");
  cfg.limits.ring_entries = 8192;
  const uint64_t large = item(*memory_budget(cfg, kHuge), "hand-off and request rings");
  EXPECT_EQ(large - small, 3u * 2u * 4096u * sizeof(void*));
  // The request and response rings of each lcore and the RCU state are on top, and small.
  EXPECT_GE(small, 3u * 2u * 4096u * sizeof(void*));
  EXPECT_LT(small, 3u * 2u * 4096u * sizeof(void*) + 64 * 1024);
}

TEST(Budget, RefusalNamesBothNumbers) {
  const config::Config cfg = default_config();
  auto b = memory_budget(cfg, kHuge);
  ASSERT_TRUE(b.has_value());
  const uint64_t need = b->total_bytes();
  EXPECT_EQ(budget_refusal(*b, Reservation{need, true, kHuge, "-m exact"}), "");
  const std::string refusal = budget_refusal(*b, Reservation{need - 1, true, kHuge, "-m short"});
  ASSERT_NE(refusal, "");
  char want[32];
  std::snprintf(want, sizeof want, "%.1f MiB", static_cast<double>(need) / kMiB);
  EXPECT_NE(refusal.find(want), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("(-m short)"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("mbuf pools"), std::string::npos) << refusal;
}

TEST(Budget, AJobAdmissionRefusesIsTheError) {
  config::Config cfg = default_config();
  cfg.limits.memory_bytes = 1024;
  auto b = memory_budget(cfg, kHuge);
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().find("limits.memory_bytes"), std::string::npos) << b.error();
}

}  // namespace
}  // namespace phub::engine
