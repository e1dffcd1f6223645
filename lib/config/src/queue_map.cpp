// The (port, queue) -> lcore map.
#include "phub/config/queue_map.hpp"

#include <algorithm>
#include <charconv>

namespace phub::config {

QueueMap queue_map(const Config& cfg) {
  QueueMap m;
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  std::vector<std::vector<uint16_t>> pollers(cfg.ports.size());  // by port, in lcore order
  m.rx_owner.resize(cfg.ports.size());
  m.by_lcore.resize(nl);
  m.tx_queues = nl;
  for (uint16_t i = 0; i < nl; ++i) {
    const auto& names = cfg.lcores[i].ports;
    for (uint16_t p = 0; p < cfg.ports.size(); ++p) {
      if (names.empty() || std::find(names.begin(), names.end(), cfg.ports[p].name) != names.end()) {
        pollers[p].push_back(i);
      }
    }
  }
  for (uint16_t p = 0; p < cfg.ports.size(); ++p) {
    const auto& who = pollers[p];
    if (who.empty()) continue;
    const auto n = std::max<size_t>(who.size(), fixed_rx_queues(cfg.ports[p].device).value_or(0));
    for (size_t q = 0; q < n; ++q) {
      const uint16_t l = who[q % who.size()];
      m.rx_owner[p].push_back(l);
      m.by_lcore[l].push_back(RxQueue{p, static_cast<uint16_t>(q)});
    }
  }
  for (auto& list : m.by_lcore) {
    std::sort(list.begin(), list.end(),
              [](const RxQueue& a, const RxQueue& b) { return a.port != b.port ? a.port < b.port : a.queue < b.queue; });
  }
  return m;
}

std::optional<uint16_t> QueueMap::queue_of(uint16_t lcore, uint16_t port) const noexcept {
  const auto& owners = rx_owner[port];
  auto it = std::find(owners.begin(), owners.end(), lcore);
  if (it == owners.end()) return std::nullopt;
  return static_cast<uint16_t>(it - owners.begin());
}

uint16_t QueueMap::steer_queue(uint16_t owner, uint16_t port) const noexcept {
  if (auto q = queue_of(owner, port)) return *q;
  return static_cast<uint16_t>(owner % rx_queues(port));
}

std::string QueueMap::describe_port(const Config& cfg, uint16_t port) const {
  std::string line = "port " + cfg.ports[port].name + ": rx";
  for (uint16_t q = 0; q < rx_queues(port); ++q) {
    line += (q == 0 ? " q" : ", q") + std::to_string(q) + " lcore " + std::to_string(cfg.lcores[rx_owner[port][q]].id);
  }
  return line + "; tx one queue per lcore (" + std::to_string(tx_queues) + ")";
}

std::string describe_rx_queues(const Config& cfg, std::span<const RxQueue> queues) {
  std::string s;
  for (const RxQueue& q : queues) {
    if (!s.empty()) s += ' ';
    s += cfg.ports[q.port].name + "/q" + std::to_string(q.queue);
  }
  return s.empty() ? "none" : s;
}

std::optional<uint16_t> fixed_rx_queues(std::string_view devargs) {
  const size_t comma = devargs.find(',');
  if (devargs.substr(0, comma).rfind("net_af_packet", 0) != 0) return std::nullopt;
  uint16_t qpairs = 1;  // the PMD's default
  for (size_t at = comma; at != std::string_view::npos;) {
    const size_t next = devargs.find(',', at + 1);
    const std::string_view kv = devargs.substr(at + 1, next == std::string_view::npos ? next : next - at - 1);
    if (kv.rfind("qpairs=", 0) == 0) {
      const std::string_view v = kv.substr(7);
      unsigned n = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec == std::errc{} && end == v.data() + v.size() && n >= 1 && n <= 0xffff) qpairs = static_cast<uint16_t>(n);
    }
    at = next;
  }
  return qpairs;
}

}  // namespace phub::config
