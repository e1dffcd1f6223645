// The server's memory budget before boot: what a config needs from the EAL's memory (mbuf pools, rings,
// descriptor rings, the data-plane state of its jobs as admission plans them), on each socket and in all, and
// the reservation its EAL arguments give it, on each socket where they split it.
// Pure: no EAL needed, so `phub-server --check` prints it and refuses a config that cannot fit, and the
// server refuses it again before the EAL starts. docs/memory.md, "The server's budget".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/base/numa_sysfs.hpp"
#include "phub/config/config.hpp"
#include "phub/config/numa_placement.hpp"

namespace phub::engine {

// Slots of the request and of the response ring between the control thread and each lcore (a power of two).
inline constexpr uint32_t kRequestRingEntries = 64;

// One packet mempool of the engine: the single place its sizes come from (Engine::open_ports creates
// exactly these, the budget counts exactly these).
struct MbufPoolPlan {
  std::string purpose;           // "hdr", "ext", "rx<port index>", "copy"
  uint32_t mbufs = 0;
  uint16_t data_room_bytes = 0;  // headroom included
  uint16_t priv_bytes = 0;
  unsigned cache = 0;            // per-lcore cache (before the mempool's own cap)
};

// Result headers: one cache line of headers after the headroom.
[[nodiscard]] MbufPoolPlan header_pool_plan(const config::Config& cfg);
// Attached (external-buffer) mbufs: no data room.
[[nodiscard]] MbufPoolPlan attach_pool_plan(const config::Config& cfg);
// Port `port`'s RX pool: room for the largest MTU of any port.
[[nodiscard]] MbufPoolPlan rx_pool_plan(const config::Config& cfg, size_t port);
// The pool of copied results, for ports that cannot send a chained frame or set tx_copy.
[[nodiscard]] MbufPoolPlan copy_pool_plan(const config::Config& cfg);

// Bytes a packet mempool takes from the EAL's memory: its objects as the mempool lays them out in pages of
// `page_bytes` (no object across a page), its ring, its header with the per-lcore caches.
[[nodiscard]] uint64_t mbuf_pool_bytes(const MbufPoolPlan& plan, uint64_t page_bytes);

struct MemoryBudget {
  struct Item {
    std::string what;
    uint64_t bytes = 0;
  };
  // One socket's share, in items of the same kinds as the whole budget's. config::kAnySocket: what may land
  // on any socket (the EAL's own tables, the RCU state, and whatever the placement put on no known socket).
  struct Socket {
    int socket = config::kAnySocket;
    std::vector<Item> items;
    [[nodiscard]] uint64_t total_bytes() const noexcept;
    // "socket 0 needs 530.1 MiB: mbuf pools (rx nic0, transmit set) 512.0 MiB, ..."
    [[nodiscard]] std::string describe() const;
  };
  std::vector<Item> items;       // all sockets together, by kind
  std::vector<Socket> sockets;   // the same bytes by socket: ascending, kAnySocket last; only sockets with a share
  [[nodiscard]] uint64_t total_bytes() const noexcept;
  // "812.4 MiB: mbuf pools 530.1 MiB (rx0 ..., ...), ..."
  [[nodiscard]] std::string describe() const;
};

// What cfg needs, at most, from the EAL's memory, and on which socket, as the engine places it: `placement`
// is config::place_memory's for the sockets of cfg's lcores and ports (at start the EAL's; before it,
// config::machine_sockets's from sysfs). RX pools and descriptor rings on their port's pool's socket, each
// lcore's state, its jobs' state and the rings that feed it on the lcore's socket, one transmit pool set on
// each socket with lcores. The copy pool is always counted: whether it is created depends on the PMDs (a
// port that cannot send a chained frame), which only the started EAL knows.
// Its jobs are planned as at start (a job admission refuses is the error). A job added later by a reload
// is admitted against limits.memory_bytes and allocated then: the reservation must have room for it.
// `page_bytes`: the pages of the EAL's memory (Reservation::page_bytes).
[[nodiscard]] Expected<MemoryBudget, std::string> memory_budget(const config::Config& cfg,
                                                                const config::Placement& placement,
                                                                uint64_t page_bytes);

// The memory the EAL arguments give the server.
struct Reservation {
  uint64_t bytes = 0;
  // Whether the EAL arguments fix it (--socket-mem, -m, --no-huge). If not, it is the free hugepages now,
  // which phub-boot raises to the budget before the server starts: `--check` (which the unit runs before
  // phub-boot) reports it and does not refuse on it; the start does.
  bool fixed = true;
  uint64_t page_bytes = 0;  // 4 KiB with --no-huge, else 2 MiB (the smallest hugepage: the budget's worst case)
  std::string source;  // "--socket-mem 4096,0", "-m 512", "--no-huge without -m: ...", "the free hugepages now, ..."
  // By socket, where the EAL's memory is split by socket: --socket-mem (a socket it does not list gets 0), or
  // the free hugepages of each node. Empty where only the total is known (-m, --no-huge, no node in sysfs).
  std::map<int, uint64_t> socket_bytes;
  // "512.0 MiB (-m 512)"
  [[nodiscard]] std::string describe() const;
  // What socket `socket` has: its share of socket_bytes; none where the reservation is not split.
  [[nodiscard]] std::optional<uint64_t> on_socket(int socket) const;
};

// From the EAL arguments the server will start with. Hugepages not fixed by --socket-mem or -m are the
// hugepages free now, `free` (the caller's I/O: read_numa_facts). An argument that is not a size is an error.
[[nodiscard]] Expected<Reservation, std::string> reservation_from_eal_args(const std::vector<std::string>& eal_args,
                                                                           const FreeHugepages& free);

// Empty when the budget fits the reservation, else the refusal, naming both numbers: one line for each
// socket whose share is over what the reservation has there, and one for the total, over the total (the
// share of no known socket counts there).
[[nodiscard]] std::string budget_refusal(const MemoryBudget& budget, const Reservation& reservation);

// The line of one socket's share against the reservation: "socket 0 needs ...; the EAL will have 4096.0 MiB
// there", or "...; from the EAL's memory of any socket" for kAnySocket and a reservation not split by socket.
[[nodiscard]] std::string describe_socket_share(const MemoryBudget::Socket& share, const Reservation& reservation);

}  // namespace phub::engine
