// Where the server's memory goes on a NUMA machine (docs/hardware.md, "Memory placement"). Pure: from the
// config, its queue map and the sockets the EAL reports for each configured lcore and port, known only
// after the EAL started (phub-server --check cannot see them).
//
// - An lcore polls only ports of its own socket. One that polls a port on another socket is refused,
//   naming both, unless its config entry says cross_socket = true.
// - A port's RX mbuf pool is on the port's socket (the NIC writes the frames there). A port whose socket is
//   unknown (a virtual device: the bus gives none) matches any lcore, and its pool goes where the lcores
//   owning most of its RX queues are (a tie to the lower socket); "any" where none of those is known.
// - An lcore's own state (its loop's buffers and counters, each job's chunk accumulators, result buffers
//   and peers, the rings that feed it) is on the lcore's socket.
// - The transmit pools (headers, result references, copies) come in one set per socket that lcores are on:
//   an lcore takes its mbufs from its own socket's set, and its TX queue frees them there.
// An unknown socket is kAnySocket, DPDK's SOCKET_ID_ANY: memory anywhere, the caller's socket first.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"
#include "phub/config/queue_map.hpp"

namespace phub::config {

inline constexpr int kAnySocket = -1;  // not known, or no preference (SOCKET_ID_ANY)

struct Placement {
  std::vector<int> rx_pool_socket;    // by port: its RX mbuf pool
  std::vector<int> lcore_socket;      // by lcore index: its state, its job state and the rings that feed it
  std::vector<int> tx_pool_sockets;   // one transmit pool set each, ascending, kAnySocket (if any) first
  std::vector<uint16_t> tx_pool_set;  // by lcore index: its set, an index into tx_pool_sockets

  // "socket 1", or "socket any" for kAnySocket.
  [[nodiscard]] static std::string socket_name(int socket);
  // "memory: port nic0 rx pool on socket 0; lcore 1 on socket 0, ...; transmit pools on socket 0", one
  // line per port and one for the lcores and transmit pools, naming ports and lcore ids from `cfg`.
  [[nodiscard]] std::vector<std::string> describe(const Config& cfg) const;
};

// The placement of `cfg`'s memory, with `queues` = queue_map(cfg), `lcore_sockets` by lcore index and
// `port_sockets` by port index (kAnySocket where the EAL does not know). The error lists every lcore that
// polls a port on another socket without cross_socket = true, naming the lcore, the port and both sockets.
[[nodiscard]] Expected<Placement, std::string> place_memory(const Config& cfg, const QueueMap& queues,
                                                            std::span<const int> lcore_sockets,
                                                            std::span<const int> port_sockets);

}  // namespace phub::config
