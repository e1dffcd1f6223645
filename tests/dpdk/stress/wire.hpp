// The emulated workers' side of the wire: where every rank of every job sends from (each job's ranks
// from their own addresses), frames built and signed as a worker builds them, and frames the server
// sent, read out of their mbufs.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <span>
#include <vector>

#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"

namespace phub::stress {

// Rank `rank` of the job at index `job` (in the epoch's job list): MAC 02:77:j:0:r:r, IPv4
// 198.18.(16 + job).(rank + 1), UDP port 50000 + 100 * job + rank.
struct RankAddress {
  MacAddr mac;
  uint32_t ip;
  uint16_t udp_port;
};
[[nodiscard]] RankAddress rank_address(uint32_t job, uint16_t rank) noexcept;

// One phub frame from `from` to the server's MAC and UDP port; signed with `key` unless it is null.
[[nodiscard]] std::vector<std::byte> worker_frame(const RankAddress& from, MacAddr server_mac,
                                                  uint16_t server_udp_port, const proto::Header& h,
                                                  std::span<const std::byte> payload, const proto::AuthKey* key);

// Copies a frame the server sent out of its mbuf chain into `out` (resized). The payload may point into a
// result buffer of the server: copying reads it as it is now.
void read_frame(const rte_mbuf* m, std::vector<std::byte>& out);

}  // namespace phub::stress
