// The sessions of phub-pktgen's emulated workers (docs/protocol.md, "Sessions"). Before the lcores start,
// the control thread joins every rank of each session job to every server lcore with the two-message
// handshake: rank 0 first, which starts the next epoch there as a training run's rank 0 does, then the other
// ranks. From then on each (rank, server lcore) session belongs to the one generator lcore that drives that
// server lcore: it seals the rank's pushes under it and opens the results and errors that come back.
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::gen {
class Workload;
struct WorkerAddrs;
}  // namespace phub::gen

namespace phub::pktgen {

// One rank's session with one server lcore.
struct WorkerSession {
  proto::SessionKeys keys{};
  proto::ReplyAddress reply{};   // the rank's address as the server saw it: what every tag binds
  uint64_t next_seq = 1;         // the number of the next packet sent under it
  proto::ReplayWindow window{};  // the numbers received under it
  bool payload_mac = false;      // the job wants the payload MAC on pushes (and sends it on results)
};

// The sessions of one job: [rank][server lcore].
class JobSessions {
 public:
  JobSessions(uint16_t workers, uint16_t owners) : owners_(owners), s_(static_cast<size_t>(workers) * owners) {}
  [[nodiscard]] WorkerSession& at(uint16_t rank, uint16_t owner) noexcept {
    return s_[static_cast<size_t>(rank) * owners_ + owner];
  }
  [[nodiscard]] size_t size() const noexcept { return s_.size(); }

 private:
  uint16_t owners_;
  std::vector<WorkerSession> s_;
};

// The port queue of a server lcore the generator does not drive (--owners): none.
inline constexpr uint16_t kNotDriven = UINT16_MAX;

// What the handshake needs of the port: it runs before the lcores, on the control thread, and sends to
// server lcore o on TX queue owner_queue[o] (the queue that lcore's generator lcore drives), polling every RX
// queue.
struct HandshakePort {
  const drivers::EthPort* port = nullptr;
  rte_mempool* pool = nullptr;  // whole-frame mbufs
  uint16_t queues = 1;                // RX queues
  std::vector<uint16_t> owner_queue;  // by server lcore; kNotDriven: not joined
};

// Join every rank of the job to every server lcore the generator drives: rank 0 restarts the job in the epoch after each lcore's
// current one (recorded in `wl`, which every later packet carries), then the other ranks join it. Fails, naming
// the rank, the lcore and what the server last answered, if a handshake is not done within `timeout_s`.
[[nodiscard]] Expected<void, std::string> join_sessions(const HandshakePort& p, gen::Workload& wl,
                                                        const gen::WorkerAddrs& addrs, JobSessions& out,
                                                        double timeout_s);

}  // namespace phub::pktgen
