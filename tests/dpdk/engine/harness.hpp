// Test harness: a net_ring link between the server's port and a worker-side port, a config builder, and
// emulated workers that push segments and collect results and errors.
#pragma once

#include <rte_ring.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "phub/base/mac.hpp"
#include "phub/config/config.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"
#include "phub/engine/engine.hpp"
#include "phub/proto/frame.hpp"

namespace phub::test {

inline constexpr uint32_t kServerIp = 0xc6120001;  // 198.18.0.1

// Two ethdev ports joined by rings: what one sends on queue q, the other receives on queue q.
class RingLink {
 public:
  explicit RingLink(uint16_t queues);
  ~RingLink();
  [[nodiscard]] const std::string& server_name() const { return server_name_; }
  [[nodiscard]] const std::string& worker_name() const { return worker_name_; }

 private:
  std::vector<rte_ring*> to_server_, to_worker_;
  std::string server_name_, worker_name_;
};

// A config with one port on the link, `lcores` worker lcores (ids 1..), and the given jobs.
config::Config make_config(const std::string& device, uint16_t lcores, std::vector<config::Job> jobs);
config::Job make_job(uint32_t id, uint16_t workers, std::vector<uint64_t> key_elems, Dtype d = Dtype::fp32);

struct Received {
  proto::Header hdr;
  std::vector<std::byte> payload;
  uint16_t dst_port = 0;  // UDP destination (the worker's port)
  uint32_t dst_ip = 0;    // IPv4 destination (the worker's address)
  uint16_t src_port = 0;  // UDP source (the server lcore's port)
  std::vector<std::byte> msg;  // the UDP payload as sent: header and payload (to open session packets)
  uint16_t udp_checksum = 0;   // the UDP checksum field as it came (0: none)
  bool udp_checksum_ok = false;  // it checks over the datagram, or is 0
};

// The 44-byte payload of a join (protocol v3) with a nonce that depends only on the arguments: a join
// resent or replayed byte for byte carries the same one, as a client's resends of one join do.
std::vector<std::byte> join_payload(uint32_t job_id, uint16_t rank, uint32_t incarnation, uint32_t seq);

// The worker side of the link: sends frames as any rank, receives everything the server sends back.
class Workers {
 public:
  // On `device`, facing the server's port `server_port` (its MAC and IPv4: the workers' addresses are in its
  // subnet, server + 100 + rank).
  Workers(const std::string& device, uint16_t queues, const engine::Engine& server, uint16_t server_port = 0);

  [[nodiscard]] proto::FlowAddrs addrs(uint16_t rank, uint16_t server_udp_port) const;
  // Send a ready frame on queue `q` (the queue of the owning lcore, as a memif or ring sender chooses).
  // `ol_flags` are set on the mbuf as sent: net_ring hands it over as it is, flags included.
  void send_frame(const std::vector<std::byte>& frame, uint16_t q, uint64_t ol_flags = 0);
  // Build and send one message of `job` from `rank` (signs with `secret` if non-empty). A push, init,
  // rerequest or pull with aux 0 carries the rank's address cookie, if a `joined` brought one for the
  // rank's current address (as a worker's client does). A join is sealed with the handshake key of the
  // secret (proto::seal_handshake). A join without a payload is a client's whole handshake: join_payload,
  // then (once its answer brought the challenge, which is taken here) the confirm of that challenge, with
  // the same seq when h.seq was given; what answers the confirm is for receive.
  void send(const config::Job& job, uint16_t rank, proto::Header h, const std::vector<std::byte>& payload,
            const std::string& secret_override = "\x01");
  // The same message built as send builds it (seq, cookie), but sealed by `seal`, given the UDP payload
  // (header and payload): a session packet.
  void send_sealed(const config::Job& job, uint16_t rank, proto::Header h, const std::vector<std::byte>& payload,
                   const std::function<void(std::span<std::byte>)>& seal);
  // Join `rank` of `job` (incarnation 1000 + rank) and keep the address cookie of the answer: the rank's
  // address is then proven. Throws if no `joined` comes.
  void prove(const config::Job& job, uint16_t rank);
  // Receive until `count` phub messages arrived or the timeout passed. Keeps the cookies `joined` brings.
  std::vector<Received> receive(size_t count, std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));
  // Up to `n` raw frames from queue `q`, as the server sent them (the caller frees them).
  [[nodiscard]] uint16_t receive_raw(uint16_t q, rte_mbuf** pkts, uint16_t n) { return port_.rx(q, pkts, n); }
  [[nodiscard]] uint16_t queues() const { return queues_; }
  // Other frames received (ARP replies, ICMP), raw.
  std::vector<std::vector<std::byte>> other;
  // When set, every frame sent is also appended here (a recording to replay or mutate).
  std::vector<std::vector<std::byte>>* record = nullptr;
  // Where every rank sends from: UDP port 50000 + udp_port_shift + rank, IPv4 server + 100 + ip_shift + rank
  // (a test moves the workers by changing them).
  uint16_t udp_port_shift = 0;
  [[nodiscard]] uint32_t last_seq() const { return last_seq_; }  // of the last packet sent
  uint32_t ip_shift = 0;
  // The queue send and send_sealed put frames on (-1: the owning lcore's, as a ring or memif sender does): a
  // test misdirects frames with it, for the receiving lcore to hand them off.
  int queue_override = -1;

  [[nodiscard]] const proto::Layout& layout(const config::Job& job, uint16_t lcores, uint16_t mtu = 1500);
  [[nodiscard]] MacAddr server_mac() const { return server_mac_; }

 private:
  drivers::Mempool pool_;
  drivers::EthPort port_;
  MacAddr server_mac_{};
  uint32_t server_ip_ = kServerIp;
  uint16_t queues_;
  std::map<uint32_t, proto::Layout> layouts_;
  uint32_t last_seq_ = 0;  // the seq of the last packet sent
  std::deque<Received> held_;  // received while send waited for a join's challenge: for receive
  // (job id, rank, IPv4, UDP port) -> the server's address cookie for it.
  std::map<std::tuple<uint32_t, uint16_t, uint32_t, uint16_t>, uint32_t> cookies_;
};

// Engine::create and start on `cfg` (std::runtime_error with the engine's message if either fails).
std::unique_ptr<engine::Engine> start_engine(const config::Config& cfg);

// An engine started on a RingLink of its own with the workers on the link's other end: make_config with
// `lcores` lcores and `jobs`, edited by `tweak` (timeouts, limits, lcore ids ...) before the engine is
// created, then Engine::create and start (std::runtime_error with the engine's message if either fails),
// Workers on every queue and every job's layout. Stops the engine when it goes; the workers go before the
// engine, the link last.
struct StartedEngine {
  StartedEngine(uint16_t lcores, std::vector<config::Job> jobs,
                const std::function<void(config::Config&)>& tweak = {});
  ~StartedEngine();
  StartedEngine(const StartedEngine&) = delete;
  StartedEngine& operator=(const StartedEngine&) = delete;

  // The layout of cfg.jobs[j] as the workers see it.
  [[nodiscard]] const proto::Layout& layout(size_t j) {
    return workers->layout(cfg.jobs[j], static_cast<uint16_t>(cfg.lcores.size()));
  }

  RingLink link;
  config::Config cfg;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Workers> workers;
};

// The header of rank `rank`'s push of segment `seg` of `chunk` in `round`.
proto::Header push_header(const proto::Layout& l, uint32_t chunk, uint32_t seg, uint32_t round, uint16_t rank,
                          Dtype d);
// Values a rank pushes: small integers, so every sum is exact in fp32/bf16/fp16.
float gradient(uint16_t rank, uint32_t round, uint32_t chunk, uint32_t elem);
std::vector<std::byte> encode(const std::vector<float>& v, Dtype d);
std::vector<float> decode(const std::vector<std::byte>& b, Dtype d);

// Counters of the job with index j, summed over lcores.
engine::JobCounters job_counters(const engine::Engine& e, size_t j);
uint64_t drops(const engine::Engine& e, engine::Drop d);
uint64_t malformed(const engine::Engine& e, proto::ParseError p);

}  // namespace phub::test
