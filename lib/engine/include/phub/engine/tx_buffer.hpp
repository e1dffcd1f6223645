// Buffered transmit for one (port, queue): packets wait here until the next flush; what the queue
// cannot take is kept for the next flush, and only a full buffer drops (counted). Once a packet is
// handed to the port it belongs to the PMD (which may free or reuse it at once): everything the
// counters need is taken when the packet is queued. A packet may name its job's hold on the slots (for the
// job's share, tenant_shares.hpp): raised when it is queued, lowered when it leaves; a packet borrowed from
// the pool also counts in the pool's lent slots until it leaves.
#pragma once

#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <cstdint>

#include "phub/drivers/eth_port.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/tenant_shares.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {

// The opcode of a phub message in an untagged Ethernet/IPv4/UDP frame without IP options, as the lcores build
// them; 0 for any other frame (ARP, ICMP). Reads the first 46 bytes of the first segment only.
[[nodiscard]] inline uint8_t sent_opcode(const rte_mbuf* m) noexcept {
  constexpr size_t kPhub = proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes;
  if (m->data_len < kPhub + 4) return 0;
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  if (p[12] != proto::kEtherTypeIpv4 >> 8 || p[13] != (proto::kEtherTypeIpv4 & 0xff) || p[14] != 0x45 ||
      p[23] != proto::kIpProtoUdp || p[kPhub] != proto::kMagic >> 8 || p[kPhub + 1] != (proto::kMagic & 0xff)) {
    return 0;
  }
  return p[kPhub + 3] < kOpcodeSlots ? p[kPhub + 3] : 0;
}

// Port: anything with `uint16_t tx(uint16_t queue, rte_mbuf** pkts, uint16_t n) const` (tests use a stand-in).
template <class Port>
class BasicTxBuffer {
 public:
  static constexpr uint16_t kCapacity = 2048;
  static constexpr uint16_t kBurst = 32;

  // `pool_lent`: the count of borrowed slots of every buffer of the lcore (null if none is borrowed).
  void bind(const Port* port, uint16_t queue, uint64_t* pool_lent = nullptr) noexcept {
    port_ = port;
    queue_ = queue;
    pool_lent_ = pool_lent;
  }

  // Queue a packet; flushes a burst when enough are waiting. Returns false (and frees) when full.
  // `hold`: the job's hold this packet counts in (only the lcore writes it), or null; `borrowed`: the packet
  // takes a slot of the pool (needs a hold and a bound pool count).
  bool add(rte_mbuf* m, LcoreCounters& c, TxHold* hold = nullptr, bool borrowed = false) noexcept {
    if (count_ == kCapacity) {
      flush(c);
      if (count_ == kCapacity) {
        rte_pktmbuf_free(m);
        bump(c.drops[static_cast<size_t>(Drop::tx_full)]);
        return false;
      }
    }
    const uint16_t at = static_cast<uint16_t>((head_ + count_) % kCapacity);
    pkts_[at] = m;
    bytes_[at] = m->pkt_len;
    opcode_[at] = sent_opcode(m);
    hold_[at] = hold;
    borrowed_[at] = borrowed;
    if (hold != nullptr) {
      bump(hold->packets);
      if (borrowed) {
        ++hold->borrowed;
        ++*pool_lent_;
      }
    }
    ++count_;
    if (count_ >= kBurst) flush(c);
    return true;
  }

  // Send as much as the queue takes now.
  void flush(LcoreCounters& c) noexcept {
    if (count_ == 0) return;
    const uint64_t start = rte_rdtsc();
    flush_bursts(c);
    bump(c.tx_burst_tsc, rte_rdtsc() - start);
  }

  [[nodiscard]] uint16_t pending() const noexcept { return count_; }

  // Drop everything still waiting (shutdown).
  void discard() noexcept {
    while (count_ > 0) {
      rte_pktmbuf_free(pkts_[head_]);
      release(head_);
      head_ = static_cast<uint16_t>((head_ + 1) % kCapacity);
      --count_;
    }
  }

 private:
  void flush_bursts(LcoreCounters& c) noexcept {
    while (count_ > 0) {
      const uint16_t contiguous = static_cast<uint16_t>(kCapacity - head_ < count_ ? kCapacity - head_ : count_);
      const uint16_t n = contiguous < kBurst ? contiguous : kBurst;
      const uint16_t sent = port_->tx(queue_, &pkts_[head_], n);
      uint64_t bytes = 0;
      for (uint16_t i = 0; i < sent; ++i) {
        bytes += bytes_[head_ + i];
        bump(c.tx_messages[opcode_[head_ + i]]);
        release(head_ + i);
      }
      bump(c.tx_bytes, bytes);
      bump(c.tx_packets, sent);
      head_ = static_cast<uint16_t>((head_ + sent) % kCapacity);
      count_ = static_cast<uint16_t>(count_ - sent);
      if (sent < n) return;  // queue full: retry on the next flush
    }
  }

  void release(uint16_t at) noexcept {
    TxHold* h = hold_[at];
    if (h == nullptr) return;
    __atomic_store_n(&h->packets, h->packets - 1, __ATOMIC_RELAXED);
    if (borrowed_[at]) {
      --h->borrowed;
      --*pool_lent_;
    }
  }

  const Port* port_ = nullptr;
  uint16_t queue_ = 0;
  uint16_t head_ = 0;
  uint16_t count_ = 0;
  uint64_t* pool_lent_ = nullptr;
  rte_mbuf* pkts_[kCapacity];
  uint32_t bytes_[kCapacity];  // each queued packet's length, taken before the PMD owns it
  uint8_t opcode_[kCapacity];  // and its phub opcode (sent_opcode)
  TxHold* hold_[kCapacity];    // each queued packet's job hold, or null
  bool borrowed_[kCapacity];   // each queued packet took a slot of the pool
};

using TxBuffer = BasicTxBuffer<drivers::EthPort>;

}  // namespace phub::engine
