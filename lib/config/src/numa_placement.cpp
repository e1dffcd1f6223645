// Where pools and per-lcore state go on a NUMA machine, and which lcores poll across sockets.
#include "phub/config/numa_placement.hpp"

#include <algorithm>
#include <map>

namespace phub::config {
namespace {

int known_or_any(int socket) { return socket < 0 ? kAnySocket : socket; }

std::string lcore_label(const Config& cfg, size_t i) {
  return "lcores[" + std::to_string(i + 1) + "] (lcore " + std::to_string(cfg.lcores[i].id) + ")";
}

// The socket of the lcores that own most of `port`'s RX queues, a tie to the lower socket; kAnySocket
// where none of them has a known socket.
int pollers_socket(const QueueMap& queues, uint16_t port, const std::vector<int>& lcore_socket) {
  std::map<int, size_t> owned;  // by known socket: RX queues of the port its lcores own
  for (const uint16_t owner : queues.rx_owner[port]) {
    if (lcore_socket[owner] != kAnySocket) ++owned[lcore_socket[owner]];
  }
  int best = kAnySocket;
  size_t most = 0;
  for (const auto& [socket, n] : owned) {  // ascending sockets: the first of the most wins a tie
    if (n > most) {
      best = socket;
      most = n;
    }
  }
  return best;
}

}  // namespace

std::string Placement::socket_name(int socket) {
  return socket < 0 ? std::string("socket any") : "socket " + std::to_string(socket);
}

std::vector<std::string> Placement::describe(const Config& cfg) const {
  std::vector<std::string> out;
  for (size_t p = 0; p < rx_pool_socket.size(); ++p) {
    out.push_back("memory: port " + cfg.ports[p].name + " rx pool on " + socket_name(rx_pool_socket[p]));
  }
  std::string line = "memory: lcore state";
  for (size_t i = 0; i < lcore_socket.size(); ++i) {
    line += (i == 0 ? " " : ", ") + std::to_string(cfg.lcores[i].id) + " on " + socket_name(lcore_socket[i]);
  }
  line += "; transmit pools on";
  for (size_t k = 0; k < tx_pool_sockets.size(); ++k) {
    line += (k == 0 ? " " : ", ") + socket_name(tx_pool_sockets[k]);
  }
  out.push_back(line);
  return out;
}

Expected<Placement, std::string> place_memory(const Config& cfg, const QueueMap& queues,
                                              std::span<const int> lcore_sockets, std::span<const int> port_sockets) {
  const size_t nl = cfg.lcores.size(), np = cfg.ports.size();
  if (lcore_sockets.size() != nl || port_sockets.size() != np || queues.by_lcore.size() != nl ||
      queues.rx_owner.size() != np) {
    return unexpected("placement: " + std::to_string(lcore_sockets.size()) + " lcore and " +
                      std::to_string(port_sockets.size()) + " port sockets given for a config of " +
                      std::to_string(nl) + " lcores and " + std::to_string(np) + " ports");
  }
  Placement pl;
  for (const int s : lcore_sockets) pl.lcore_socket.push_back(known_or_any(s));

  std::string refused;
  for (size_t i = 0; i < nl; ++i) {
    std::vector<uint16_t> said;  // ports already named for this lcore (it may own several queues of one)
    for (const RxQueue& q : queues.by_lcore[i]) {
      const int port_socket = known_or_any(port_sockets[q.port]);
      const int mine = pl.lcore_socket[i];
      if (cfg.lcores[i].cross_socket || port_socket == kAnySocket || mine == kAnySocket || port_socket == mine) {
        continue;
      }
      if (std::find(said.begin(), said.end(), q.port) != said.end()) continue;
      said.push_back(q.port);
      refused += (refused.empty() ? "" : "\n") + lcore_label(cfg, i) + " on " + Placement::socket_name(mine) +
                 " polls port " + cfg.ports[q.port].name + " on " + Placement::socket_name(port_socket) +
                 ": its frames would cross sockets; poll ports of the lcore's own socket, or set cross_socket = "
                 "true on lcores[" + std::to_string(i + 1) + "] to allow it";
    }
  }
  if (!refused.empty()) return unexpected(std::move(refused));

  for (uint16_t p = 0; p < np; ++p) {
    const int own = known_or_any(port_sockets[p]);
    pl.rx_pool_socket.push_back(own != kAnySocket ? own : pollers_socket(queues, p, pl.lcore_socket));
  }
  pl.tx_pool_sockets = pl.lcore_socket;
  std::sort(pl.tx_pool_sockets.begin(), pl.tx_pool_sockets.end());
  pl.tx_pool_sockets.erase(std::unique(pl.tx_pool_sockets.begin(), pl.tx_pool_sockets.end()), pl.tx_pool_sockets.end());
  for (const int s : pl.lcore_socket) {
    const auto at = std::lower_bound(pl.tx_pool_sockets.begin(), pl.tx_pool_sockets.end(), s);
    pl.tx_pool_set.push_back(static_cast<uint16_t>(at - pl.tx_pool_sockets.begin()));
  }
  return pl;
}

}  // namespace phub::config
