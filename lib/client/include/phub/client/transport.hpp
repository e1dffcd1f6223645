// Kernel UDP transport of the client: one non-blocking socket, sendmmsg with UDP GSO (one system call
// per batch, one stack traversal per chunk), recvmmsg with UDP GRO, and optional fault injection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "phub/client/error.hpp"
#include "phub/client/options.hpp"
#include "phub/client/plan.hpp"
#include "phub/proto/header.hpp"

namespace phub::client {

// One datagram to send: a phub header (kHeaderBytes) and a payload, both in memory that stays valid
// during the send call (payloads are sent straight from the caller's tensors).
struct OutPacket {
  Endpoint to;
  const std::byte* header = nullptr;
  const std::byte* payload = nullptr;
  uint32_t payload_bytes = 0;
  uint32_t op = UINT32_MAX;  // the operation whose buffer the payload is read from (UINT32_MAX: none)
  const std::byte* tail = nullptr;  // sent after the payload (a ps push's tail, header.hpp flag::tail)
  uint32_t tail_bytes = 0;
  [[nodiscard]] size_t datagram_bytes() const noexcept { return proto::kHeaderBytes + payload_bytes + tail_bytes; }
};

struct TransportCounters {
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  uint64_t send_batches = 0;
  uint64_t recv_batches = 0;
  uint64_t fault_drops = 0;
  uint64_t gro_coalesced = 0;
};

// A small deterministic generator for fault injection (xorshift64*).
class FaultDice {
 public:
  explicit FaultDice(uint64_t seed) noexcept : s_(seed == 0 ? 0x9e3779b97f4a7c15ull : seed) {}
  // True with probability ppm / 10^6.
  [[nodiscard]] bool roll(uint32_t ppm) noexcept {
    if (ppm == 0) return false;
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return (s_ * 0x2545f4914f6cdd1dull) % 1000000 < ppm;
  }

 private:
  uint64_t s_;
};

class Transport {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Transport>> open(const Options& o);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Hands packets to the kernel in order. Returns how many were taken: fewer than given when the socket
  // buffer is full (wait for POLLOUT), an error only for a real socket failure.
  [[nodiscard]] Result<size_t> send(std::span<const OutPacket> pkts);

  // Receives one batch of what is waiting, calling on(bytes, from) for each datagram (GRO batches are
  // split back into datagrams). Returns the number of datagrams, 0 when nothing was waiting.
  template <class F>
  [[nodiscard]] Result<size_t> receive(F&& on);

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] bool gso() const noexcept { return gso_; }
  void disable_gso() noexcept { gso_ = false; }
  [[nodiscard]] bool gro() const noexcept { return gro_; }
  [[nodiscard]] const TransportCounters& counters() const noexcept { return counters_; }

  static constexpr size_t kSendBatch = 32;     // msghdrs per sendmmsg
  static constexpr size_t kMaxGsoSegments = 64;
  static constexpr size_t kMaxGsoBytes = 63 * 1024;
  static constexpr size_t kRecvBatch = 32;
  static constexpr size_t kIovsPerPacket = 3;  // header, payload, tail

 private:
  Transport() = default;
  [[nodiscard]] Result<size_t> send_now(std::span<const OutPacket> pkts);
  // Fills msgs_[m] with a group of packets starting at pkts[0]; returns the packets grouped.
  size_t fill_message(size_t m, std::span<const OutPacket> pkts);
  [[nodiscard]] Result<size_t> recv_batch();
  [[nodiscard]] uint16_t gro_size(size_t i) const noexcept;
  std::span<const OutPacket> apply_faults(std::span<const OutPacket> pkts, std::vector<size_t>& origin);

  int fd_ = -1;
  bool gso_ = false;
  bool gro_ = false;
  size_t recv_bytes_ = 0;  // per receive buffer
  Faults faults_;
  FaultDice dice_{0};
  TransportCounters counters_;

  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iovs_;
  std::vector<sockaddr_storage> addrs_;
  std::vector<std::byte> cmsgs_;
  std::vector<size_t> group_packets_;

  std::vector<mmsghdr> rmsgs_;
  std::vector<iovec> riovs_;
  std::vector<sockaddr_storage> raddrs_;
  std::vector<std::byte> rcmsgs_;
  std::vector<std::byte> rbufs_;

  // Fault injection: the rewritten packet list, and packets held back for the next call (copied).
  std::vector<OutPacket> faulted_;
  std::vector<size_t> origin_;
  std::vector<std::byte> held_bytes_;
  std::vector<OutPacket> held_;
  std::vector<std::byte> held_scratch_;  // copies of packets released in this call, alive while sending
};

template <class F>
Result<size_t> Transport::receive(F&& on) {
  auto got = recv_batch();
  if (!got) return got;
  size_t datagrams = 0;
  for (size_t i = 0; i < *got; ++i) {
    const auto& mh = rmsgs_[i].msg_hdr;
    const auto* sin = reinterpret_cast<const sockaddr_in*>(mh.msg_name);
    const Endpoint from{ntohl(sin->sin_addr.s_addr), ntohs(sin->sin_port)};
    const std::byte* base = static_cast<const std::byte*>(mh.msg_iov[0].iov_base);
    const size_t len = rmsgs_[i].msg_len;
    const size_t step = gro_size(i) != 0 ? gro_size(i) : len;
    if (step < len) counters_.gro_coalesced += (len + step - 1) / step;
    for (size_t off = 0; off < len && step != 0; off += step) {
      ++datagrams;
      if (faults_.drop_rx_ppm != 0 && dice_.roll(faults_.drop_rx_ppm)) {
        ++counters_.fault_drops;
        continue;
      }
      on(std::span<const std::byte>(base + off, std::min(step, len - off)), from);
    }
  }
  counters_.packets_received += datagrams;
  return datagrams;
}

}  // namespace phub::client
