// Which lcore polls which RX queue of which port (docs/config.md, "Queues"). A port has one RX queue per
// lcore that polls it (lcores[].ports; all ports when empty), numbered in lcore order, unless its PMD has a
// fixed number that the driver fills whatever is configured (net_af_packet's qpairs: the kernel's fan-out
// feeds every socket the PMD opened): then the port has that many, dealt to its pollers in turn, an lcore
// owning several. So no queue that RSS, a flow rule or a fan-out can fill is left unpolled. Every lcore
// has its own TX queue on every port, numbered by its lcore index (results go out on the port a rank's
// packets come in on, from the lcore that owns the chunk). Pure: from the config alone.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "phub/config/config.hpp"

namespace phub::config {

struct RxQueue {
  uint16_t port = 0;   // port index (config order)
  uint16_t queue = 0;  // RX queue of that port
  friend bool operator==(const RxQueue&, const RxQueue&) = default;
};

struct QueueMap {
  std::vector<std::vector<uint16_t>> rx_owner;  // by port, by RX queue: the lcore index that polls it
  std::vector<std::vector<RxQueue>> by_lcore;   // by lcore index: the (port, queue) pairs it polls
  uint16_t tx_queues = 0;                       // per port: one per lcore

  [[nodiscard]] uint16_t rx_queues(uint16_t port) const noexcept {
    return static_cast<uint16_t>(rx_owner[port].size());
  }
  // The first RX queue lcore `lcore` polls on `port`, if it polls that port.
  [[nodiscard]] std::optional<uint16_t> queue_of(uint16_t lcore, uint16_t port) const noexcept;
  // Where a flow rule sends the UDP port of lcore `owner` on `port`: the owner's first queue when it polls
  // the port, else queue `owner` modulo the port's queues, whose poller hands the frames over.
  [[nodiscard]] uint16_t steer_queue(uint16_t owner, uint16_t port) const noexcept;
  // "port p0: rx q0 lcore 1, q1 lcore 2; tx one queue per lcore (2)", naming ports and lcore ids from `cfg`.
  [[nodiscard]] std::string describe_port(const Config& cfg, uint16_t port) const;
};

// "p0/q0 p1/q0 p1/q2" for an lcore's (port, queue) pairs, naming ports from `cfg` ("none" for none).
[[nodiscard]] std::string describe_rx_queues(const Config& cfg, std::span<const RxQueue> queues);

// The map of `cfg`, whose every port some lcore polls (validate refuses a config where one does not).
[[nodiscard]] QueueMap queue_map(const Config& cfg);

// The RX queues a port's PMD has whatever is configured, from its devargs: net_af_packet's qpairs (1 when
// not given). Nothing for a PMD whose queues are what the application configures.
[[nodiscard]] std::optional<uint16_t> fixed_rx_queues(std::string_view devargs);

}  // namespace phub::config
