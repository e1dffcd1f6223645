// The memory budget (pure): the reservation EAL arguments give, what a config needs in all and on each
// socket (one-, two- and four-socket shapes), and the refusal.
#include "phub/engine/budget.hpp"

#include <gtest/gtest.h>
#include <rte_rcu_qsbr.h>

#include "phub/config/load.hpp"
#include "phub/config/numa_placement.hpp"
#include "phub/config/queue_map.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kHuge = 2 * kMiB;
constexpr uint64_t kSmall = 4096;

const FreeHugepages no_hugepages{};

Reservation reserve(std::vector<std::string> args, const FreeHugepages& free = no_hugepages) {
  auto r = reservation_from_eal_args(args, free);
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
  const FreeHugepages two_gib{2048 * kMiB, {}};
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

// Every lcore and port on socket 0: this machine's shape.
Expected<MemoryBudget, std::string> one_socket_budget(const config::Config& cfg, uint64_t page_bytes) {
  const std::vector<int> lcores(cfg.lcores.size(), 0), ports(cfg.ports.size(), 0);
  auto pl = config::place_memory(cfg, config::queue_map(cfg), lcores, ports);
  if (!pl) return unexpected(pl.error());
  return memory_budget(cfg, *pl, page_bytes);
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
  auto b = one_socket_budget(cfg, r->page_bytes);
  ASSERT_TRUE(b.has_value()) << b.error();
  EXPECT_EQ(budget_refusal(*b, *r), "") << b->describe();
  EXPECT_GT(item(*b, "job state"), 0u);
  EXPECT_GT(item(*b, "mbuf pools"), static_cast<uint64_t>(cfg.limits.mbufs) * 2048);
}

TEST(Budget, GrowsWithMbufsMtuAndJobs) {
  const config::Config cfg = default_config();
  const uint64_t base = one_socket_budget(cfg, kHuge)->total_bytes();
  config::Config more = cfg;
  more.limits.mbufs = cfg.limits.mbufs * 2 + 1;
  // The default has one port: its RX pool and the copy pool hold frame-sized mbufs.
  ASSERT_EQ(cfg.ports.size(), 1u);
  EXPECT_GT(one_socket_budget(more, kHuge)->total_bytes(), base + static_cast<uint64_t>(cfg.limits.mbufs) * 2048 * 2);
  config::Config jumbo = cfg;
  for (auto& p : jumbo.ports) p.mtu = 9000;
  EXPECT_GT(item(*one_socket_budget(jumbo, kHuge), "mbuf pools"), static_cast<uint64_t>(cfg.limits.mbufs) * 9000 * 2);
  config::Config bigger = cfg;
  bigger.jobs[0].keys.push_back({"extra", 4'000'000});
  EXPECT_GT(item(*one_socket_budget(bigger, kHuge), "job state"), item(*one_socket_budget(cfg, kHuge), "job state") + 4'000'000ull * 4);
}

// A hand-off ring of limits.ring_entries (a power of two) has that many slots of one pointer: doubling the
// entries adds that much per ring, and there is a ring from each lcore to each other one.
TEST(Budget, HandOffRingsHoldRingEntriesSlots) {
  config::Config cfg = default_config();
  while (cfg.lcores.size() < 3) cfg.lcores.push_back({static_cast<unsigned>(cfg.lcores.size() + 1), {}});
  cfg.limits.ring_entries = 4096;
  const uint64_t small = item(*one_socket_budget(cfg, kHuge), "hand-off and request rings");
  cfg.limits.ring_entries = 8192;
  const uint64_t large = item(*one_socket_budget(cfg, kHuge), "hand-off and request rings");
  EXPECT_EQ(large - small, 3u * 2u * 4096u * sizeof(void*));
  // The request and response rings of each lcore and the RCU state are on top, and small.
  EXPECT_GE(small, 3u * 2u * 4096u * sizeof(void*));
  EXPECT_LT(small, 3u * 2u * 4096u * sizeof(void*) + 64 * 1024);
}

TEST(Budget, RefusalNamesBothNumbers) {
  const config::Config cfg = default_config();
  auto b = one_socket_budget(cfg, kHuge);
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
  auto b = one_socket_budget(cfg, kHuge);
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().find("limits.memory_bytes"), std::string::npos) << b.error();
}

// The budget by socket: config::place_memory's placement for the given lcore and port sockets, the budget's
// items split by it. Ports nic0.. on net_ring devices; `polls` one per lcore (ids 1, 2, ...), the ports it polls.
struct SocketShape {
  config::Config cfg;
  std::vector<int> lcore_sockets, port_sockets;

  SocketShape(std::vector<int> port_socket, const std::vector<std::vector<std::string>>& polls,
              std::vector<int> lcore_socket)
      : cfg(default_config()), lcore_sockets(std::move(lcore_socket)), port_sockets(std::move(port_socket)) {
    const config::Port model = cfg.ports.at(0);
    cfg.ports.clear();
    for (size_t p = 0; p < port_sockets.size(); ++p) {
      config::Port port = model;
      port.name = "nic" + std::to_string(p);
      port.device = "net_ring" + std::to_string(p);
      cfg.ports.push_back(port);
    }
    cfg.lcores.clear();
    for (size_t i = 0; i < polls.size(); ++i) cfg.lcores.push_back({static_cast<unsigned>(i + 1), polls[i]});
  }
  [[nodiscard]] MemoryBudget budget() const {
    auto pl = config::place_memory(cfg, config::queue_map(cfg), lcore_sockets, port_sockets);
    if (!pl) {
      ADD_FAILURE() << pl.error();
      return {};
    }
    auto b = memory_budget(cfg, *pl, kHuge);
    if (!b) {
      ADD_FAILURE() << b.error();
      return {};
    }
    return *b;
  }
};

const MemoryBudget::Socket& share(const MemoryBudget& b, int socket) {
  for (const auto& s : b.sockets) {
    if (s.socket == socket) return s;
  }
  ADD_FAILURE() << "no share of socket " << socket;
  static const MemoryBudget::Socket none;
  return none;
}

std::string names(const MemoryBudget::Socket& s) {
  std::string out;
  for (const auto& i : s.items) out += (out.empty() ? "" : "; ") + i.what;
  return out;
}

// The budget has shares of exactly `want`, and they add up to its total.
void expect_sockets(const MemoryBudget& b, const std::vector<int>& want) {
  std::vector<int> got;
  uint64_t sum = 0;
  for (const auto& s : b.sockets) {
    got.push_back(s.socket);
    sum += s.total_bytes();
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(sum, b.total_bytes());
}

// The items of a socket with lcores on it: the RX pools and descriptor rings of `ports`, the state of `lcores`.
std::string lcore_socket_items(const std::vector<std::string>& ports, const std::string& lcores) {
  std::string rx, rings;
  for (const auto& p : ports) {
    rx += "rx " + p + ", ";
    rings += (rings.empty() ? "" : ", ") + p;
  }
  return "mbuf pools (" + rx + "transmit set); descriptor rings (" + rings +
         "); hand-off and request rings; lcore state (" + lcores + "); job state";
}

uint64_t transmit_set_bytes(const config::Config& cfg) {
  return mbuf_pool_bytes(header_pool_plan(cfg), kHuge) + mbuf_pool_bytes(attach_pool_plan(cfg), kHuge) +
         mbuf_pool_bytes(copy_pool_plan(cfg), kHuge);
}

TEST(SocketBudget, OneSocketHoldsAllButTheEalAndRcu) {
  const SocketShape s({0}, {{}, {}}, {0, 0});
  const MemoryBudget b = s.budget();
  expect_sockets(b, {0, config::kAnySocket});
  EXPECT_EQ(names(share(b, 0)), lcore_socket_items({"nic0"}, "lcore 1, lcore 2"));
  EXPECT_EQ(names(share(b, config::kAnySocket)), "hand-off and request rings (RCU state); EAL");
  EXPECT_EQ(share(b, config::kAnySocket).total_bytes(), item(b, "EAL") + rte_rcu_qsbr_get_memsize(2));
  // The job state is all on the lcores' socket, as much as the whole budget counts.
  EXPECT_EQ(share(b, 0).items.back().bytes, item(b, "job state"));
  EXPECT_EQ(item(b, "mbuf pools (4 of"), share(b, 0).items.front().bytes);
}

TEST(SocketBudget, TwoSocketsSplitPerNicGetOneTransmitSetEach) {
  const SocketShape two({0, 1}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 0, 1, 1});
  const MemoryBudget b = two.budget();
  expect_sockets(b, {0, 1, config::kAnySocket});
  EXPECT_EQ(names(share(b, 0)), lcore_socket_items({"nic0"}, "lcore 1, lcore 2"));
  EXPECT_EQ(names(share(b, 1)), lcore_socket_items({"nic1"}, "lcore 3, lcore 4"));
  // Symmetric halves: the same bytes on each socket but for the job state, whose chunks split unevenly.
  for (size_t k = 0; k + 1 < share(b, 0).items.size(); ++k) {
    EXPECT_EQ(share(b, 0).items[k].bytes, share(b, 1).items[k].bytes) << share(b, 0).items[k].what;
  }
  // The same config with every lcore on socket 0: one transmit set less, the same job state in all.
  const SocketShape one({0, 0}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 0, 0, 0});
  const MemoryBudget b1 = one.budget();
  EXPECT_EQ(b.total_bytes() - b1.total_bytes(), transmit_set_bytes(two.cfg));
  EXPECT_EQ(item(b, "job state"), item(b1, "job state"));
  EXPECT_EQ(share(b, 0).items.back().bytes + share(b, 1).items.back().bytes, item(b1, "job state"));
  EXPECT_NE(b.items.front().what.find("(8 of"), std::string::npos) << b.items.front().what;
}

TEST(SocketBudget, FourSocketsWithAVirtualPortAndAnLcoreOfNoKnownSocket) {
  // nic0..nic3 on sockets 0..3, nic4 a virtual device (no socket); lcores 1..8 two per socket, the first of
  // each pair also polling nic4, and lcore 9 on CPUs of two nodes (no socket) polling nic4 alone.
  const SocketShape s({0, 1, 2, 3, config::kAnySocket},
                      {{"nic0", "nic4"}, {"nic0"}, {"nic1", "nic4"}, {"nic1"}, {"nic2", "nic4"}, {"nic2"},
                       {"nic3", "nic4"}, {"nic3"}, {"nic4"}},
                      {0, 0, 1, 1, 2, 2, 3, 3, config::kAnySocket});
  const MemoryBudget b = s.budget();
  expect_sockets(b, {0, 1, 2, 3, config::kAnySocket});
  // nic4's pollers are on every socket once (lcore 9 counts for none): a tie, to the lowest socket.
  EXPECT_EQ(names(share(b, 0)), lcore_socket_items({"nic0", "nic4"}, "lcore 1, lcore 2"));
  EXPECT_EQ(names(share(b, 3)), lcore_socket_items({"nic3"}, "lcore 7, lcore 8"));
  EXPECT_EQ(names(share(b, config::kAnySocket)),
            "mbuf pools (transmit set); hand-off and request rings (RCU state); lcore state (lcore 9); job state; "
            "EAL");
  // Five transmit sets (four sockets and "any"), five RX pools.
  EXPECT_NE(b.items.front().what.find("(20 of"), std::string::npos) << b.items.front().what;
}

TEST(SocketBudget, APlacementOfAnotherConfigIsAnError) {
  const SocketShape s({0}, {{}, {}}, {0, 0});
  auto pl = config::place_memory(s.cfg, config::queue_map(s.cfg), s.lcore_sockets, s.port_sockets);
  ASSERT_TRUE(pl.has_value());
  config::Config more = s.cfg;
  more.lcores.push_back({3, {}});
  auto b = memory_budget(more, *pl, kHuge);
  ASSERT_FALSE(b.has_value());
  EXPECT_NE(b.error().find("2 lcores and 1 ports for a config of 3 lcores"), std::string::npos) << b.error();
}

TEST(Reservation, SocketMemSplitsBySocketAndOthersAreTotals) {
  const Reservation r = reserve({"--socket-mem=0,1500"});
  EXPECT_EQ(r.socket_bytes, (std::map<int, uint64_t>{{0, 0}, {1, 1500 * kMiB}}));
  EXPECT_EQ(r.on_socket(1), 1500 * kMiB);
  EXPECT_EQ(r.on_socket(2), 0u);  // a socket --socket-mem does not list gets none
  EXPECT_EQ(reserve({"-m", "512"}).on_socket(0), std::nullopt);
  EXPECT_EQ(reserve({"--no-huge", "--socket-mem", "512"}).on_socket(0), std::nullopt);  // the EAL ignores it there
  const FreeHugepages per_node{3072 * kMiB, {{0, 1024 * kMiB}, {1, 2048 * kMiB}}};
  const Reservation free = reserve({"-l", "0-3"}, per_node);
  EXPECT_FALSE(free.fixed);
  EXPECT_EQ(free.bytes, 3072 * kMiB);
  EXPECT_EQ(free.on_socket(1), 2048 * kMiB);
  EXPECT_NE(free.source.find("each node"), std::string::npos) << free.source;
  // Per node only where sysfs has nodes.
  EXPECT_EQ(reserve({"-l", "0-3"}, FreeHugepages{3072 * kMiB, {}}).on_socket(0), std::nullopt);
}

std::string mib_text(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / kMiB);
  return buf;
}

TEST(SocketBudget, ASocketShortOfItsShareIsRefusedNamingItWhileTheTotalIsEnough) {
  const SocketShape two({0, 1}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 0, 1, 1});
  const MemoryBudget b = two.budget();
  const uint64_t need0 = share(b, 0).total_bytes();
  const uint64_t short0 = need0 / kMiB;  // whole MiB, under socket 0's share
  const uint64_t plenty = b.total_bytes() / kMiB + 1;  // enough for everything else, and the total
  const std::string arg = std::to_string(short0) + "," + std::to_string(plenty);
  const Reservation r = reserve({"--socket-mem", arg});
  ASSERT_GT(r.bytes, b.total_bytes());
  const std::string refusal = budget_refusal(b, r);
  EXPECT_EQ(refusal, "memory: " + share(b, 0).describe() + "; the EAL will have " + mib_text(short0 * kMiB) +
                         " there (--socket-mem " + arg +
                         "): reserve more (eal_args), or lower limits.mbufs or the jobs' sizes");
  EXPECT_NE(refusal.find("socket 0 needs " + mib_text(need0)), std::string::npos) << refusal;
  // Enough on socket 0 and none listed for socket 1: socket 1 is refused, at 0 MiB.
  const std::string only0 = budget_refusal(b, reserve({"--socket-mem", std::to_string(plenty)}));
  EXPECT_NE(only0.find("memory: socket 1 needs " + mib_text(share(b, 1).total_bytes())), std::string::npos) << only0;
  EXPECT_NE(only0.find("the EAL will have 0.0 MiB there"), std::string::npos) << only0;
  EXPECT_EQ(only0.find("socket 0 needs"), std::string::npos) << only0;
  // A total only (-m): no socket is refused, the total is.
  EXPECT_EQ(budget_refusal(b, reserve({"-m", std::to_string(plenty)})), "");
  EXPECT_EQ(budget_refusal(b, reserve({"-m", std::to_string(short0)})).find("memory: the config needs "), 0u);
}

TEST(SocketBudget, TheShareOfNoSocketCountsAgainstTheTotal) {
  const SocketShape two({0, 1}, {{"nic0"}, {"nic0"}, {"nic1"}, {"nic1"}}, {0, 0, 1, 1});
  const MemoryBudget b = two.budget();
  // Each known socket gets its share, rounded up to a MiB, and nothing more: the EAL and RCU share does not fit.
  const uint64_t s0 = (share(b, 0).total_bytes() + kMiB - 1) / kMiB, s1 = (share(b, 1).total_bytes() + kMiB - 1) / kMiB;
  const Reservation tight = reserve({"--socket-mem", std::to_string(s0) + "," + std::to_string(s1)});
  const std::string refusal = budget_refusal(b, tight);
  EXPECT_EQ(refusal.find("memory: the config needs "), 0u) << refusal;
  EXPECT_EQ(refusal.find("socket 0"), std::string::npos) << refusal;
  // With the EAL's 16 MiB on socket 1 as well, it fits.
  EXPECT_EQ(budget_refusal(b, reserve({"--socket-mem", std::to_string(s0) + "," + std::to_string(s1 + 17)})), "");
  // The lines --check prints.
  EXPECT_EQ(describe_socket_share(share(b, 1), tight),
            share(b, 1).describe() + "; the EAL will have " + mib_text(s1 * kMiB) + " there");
  EXPECT_EQ(describe_socket_share(share(b, config::kAnySocket), tight),
            share(b, config::kAnySocket).describe() +
                "; from the EAL's memory of any socket (its socket unknown before the start), in the total");
  EXPECT_EQ(describe_socket_share(share(b, 0), reserve({"-m", "4096"})),
            share(b, 0).describe() +
                "; from the EAL's memory of any socket (not split by socket: -m 4096), in the total");
  EXPECT_EQ(share(b, 0).describe().find("socket 0 needs "), 0u);
  EXPECT_EQ(share(b, config::kAnySocket).describe().find("socket any needs "), 0u);
}

}  // namespace
}  // namespace phub::engine
