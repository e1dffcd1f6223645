// The DPDK probe station: the per-frame handling of ARP, ping and probe datagrams on one port queue.
#include "dpdk_station.hpp"

#include <rte_cycles.h>

#include <algorithm>

#include "phub/base/bytes.hpp"
#include "phub/drivers/arp_mbuf.hpp"
#include "phub/proto/arp_icmp.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/probe_reflect.hpp"

namespace phub::probe {
namespace {

constexpr uint16_t kBurst = 32;
constexpr uint64_t kArpTtlSeconds = 60;
constexpr size_t kUdpChecksumOffset = 6;

}  // namespace

Station::Station(const drivers::EthPort& port, rte_mempool* pool, const StationAddr& addr, uint64_t tsc_hz)
    : port_(port),
      pool_(pool),
      addr_(addr),
      ns_per_cycle_(1e9 / static_cast<double>(tsc_hz)),
      arp_(kArpTtlSeconds * tsc_hz) {}

uint32_t Station::next_hop(uint32_t ip) const noexcept {
  return ((ip ^ addr_.ip) & addr_.netmask) == 0 ? ip : addr_.gateway;
}

const MacAddr* Station::mac_of(uint32_t ip) const noexcept { return arp_.find(ip, rte_rdtsc()); }

unsigned Station::poll(AwaitedReply* awaited) noexcept {
  std::array<rte_mbuf*, kBurst> rx;
  const uint16_t n = port_.rx(0, rx.data(), kBurst);
  if (n == 0) return 0;
  const uint64_t rx_tsc = rte_rdtsc();
  counters_.rx_frames += n;
  std::array<rte_mbuf*, kBurst> tx;
  std::array<std::byte*, kBurst> stamp_at;
  unsigned ntx = 0, ours = 0;
  for (uint16_t i = 0; i < n; ++i) {
    std::byte* stamp = nullptr;
    const Fate fate = handle(rx[i], rx_tsc, awaited, stamp, ours);
    if (fate == Fate::drop) {
      rte_pktmbuf_free(rx[i]);
      continue;
    }
    stamp_at[ntx] = fate == Fate::send_stamped ? stamp : nullptr;
    tx[ntx++] = rx[i];
  }
  if (ntx == 0) return ours;
  // The turnaround runs from the end of the RX burst to just before the TX burst.
  const uint64_t turnaround_ns = cycles_to_ns(rte_rdtsc() - rx_tsc);
  for (unsigned i = 0; i < ntx; ++i)
    if (stamp_at[i] != nullptr) store_be<uint64_t>(stamp_at[i], turnaround_ns);
  const uint16_t sent = port_.tx(0, tx.data(), static_cast<uint16_t>(ntx));
  for (unsigned i = sent; i < ntx; ++i) rte_pktmbuf_free(tx[i]);
  counters_.tx_failed += ntx - sent;
  return ours;
}

Station::Fate Station::handle(rte_mbuf* m, uint64_t rx_tsc, AwaitedReply* awaited, std::byte*& stamp_at,
                              unsigned& ours) noexcept {
  if (m->nb_segs != 1) return Fate::drop;
  const std::span<std::byte> frame(rte_pktmbuf_mtod(m, std::byte*), m->data_len);
  auto l2 = proto::parse_l2(frame);
  if (!l2) return Fate::drop;
  if (l2->ether_type == proto::kEtherTypeArp) return handle_arp(frame, *l2, m, rx_tsc, ours);
  if (l2->ether_type != proto::kEtherTypeIpv4) return Fate::drop;
  auto ip = proto::parse_ipv4(frame, *l2);
  if (!ip || ip->dst != addr_.ip) return Fate::drop;
  if (ip->protocol == proto::kIpProtoIcmp) {
    auto echo = proto::parse_icmp_echo_request(frame, *ip);
    if (!echo) return Fate::drop;
    proto::icmp_echo_reply_in_place(frame, *l2, *ip, *echo);
    ++counters_.pings_answered;
    ++ours;
    return Fate::send;
  }
  auto f = proto::parse_phub_frame(frame, /*verify_ip_checksum=*/false);  // checked just above
  if (!f || f->udp.dst_port != addr_.udp_port) return Fate::drop;
  const size_t body_offset = f->udp.payload_offset + proto::kHeaderBytes;
  const std::span<std::byte> body = frame.subspan(body_offset, f->hdr.payload_bytes);
  if (f->hdr.opcode == proto::Opcode::probe_request) {
    ++ours;
    // No UDP checksum and no CRC in the reply: the turnaround time goes into its body below.
    proto::reflect_probe_in_place(frame, *f, addr_.mac);
    ++counters_.reflected;
    last_request_tsc_ = rx_tsc;
    if (body.size() < kMinBodyBytes) return Fate::send;
    stamp_at = body.data() + kBodyTurnaroundOffset;
    return Fate::send_stamped;
  }
  if (f->hdr.opcode != proto::Opcode::probe_reply) return Fate::drop;
  ++ours;
  const bool match = awaited != nullptr && !awaited->arrived && f->ip.src == awaited->peer_ip &&
                     f->udp.src_port == awaited->peer_port && f->hdr.seq == awaited->seq &&
                     f->hdr.aux == awaited->nonce && body.size() >= kMinBodyBytes &&
                     load_be<uint64_t>(body.data() + kBodyStampOffset) == awaited->stamp_tsc;
  if (!match) {
    ++counters_.replies_unmatched;
    return Fate::drop;
  }
  awaited->arrived = true;
  awaited->rx_tsc = rx_tsc;
  awaited->turnaround_ns = load_be<uint64_t>(body.data() + kBodyTurnaroundOffset);
  ++counters_.replies_matched;
  return Fate::drop;
}

Station::Fate Station::handle_arp(std::span<std::byte> frame, const proto::L2& l2, rte_mbuf* m, uint64_t now,
                                  unsigned& ours) noexcept {
  auto arp = proto::parse_arp(frame, l2);
  if (!arp) return Fate::drop;
  if (arp->sender_ip == arp->target_ip && arp->sender_ip != 0) {  // gratuitous, request or reply: not learnt
    ++counters_.arp_ignored;
    return Fate::drop;
  }
  if (arp->target_ip != addr_.ip || arp->sender_ip == 0) return Fate::drop;
  ++ours;
  if (arp->op == proto::ArpOp::reply) {
    // Only the answer to a question of ours, addressed to us, is learnt; and a request teaches nothing.
    if (!mac_equal(arp->target_mac, addr_.mac) || !arp_.learn_reply(arp->sender_ip, arp->sender_mac, now))
      ++counters_.arp_ignored;
    return Fate::drop;
  }
  if (arp->op != proto::ArpOp::request || !drivers::rewrite_as_arp_reply(m, *arp, addr_.mac, addr_.ip)) {
    return Fate::drop;
  }
  ++counters_.arp_answered;
  return Fate::send;
}

bool Station::send_one(rte_mbuf* m) noexcept {
  if (port_.tx(0, &m, 1) == 1) return true;
  rte_pktmbuf_free(m);
  ++counters_.tx_failed;
  return false;
}

bool Station::send_arp_request(uint32_t target_ip, uint64_t answer_within) noexcept {
  rte_mbuf* m = drivers::alloc_arp_request(pool_, addr_.mac, addr_.ip, target_ip);
  if (m == nullptr) return false;
  arp_.expect(target_ip, rte_rdtsc() + answer_within);  // before it leaves: the reply may come at once
  return send_one(m);
}

uint64_t Station::send_probe_request(const ProbeTarget& to, uint32_t seq, uint32_t nonce, size_t body_bytes) noexcept {
  body_bytes = std::clamp(body_bytes, kMinBodyBytes, kMaxBodyBytes);
  const size_t len = proto::kFrameHeadersBytes + body_bytes;
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) return 0;
  auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  store_be<uint64_t>(body_.data() + kBodyNonceOffset, nonce);
  proto::Header h;
  h.opcode = proto::Opcode::probe_request;
  h.seq = seq;
  h.aux = nonce;
  const proto::FlowAddrs a{addr_.mac, to.mac, addr_.ip, to.ip, addr_.udp_port, to.udp_port, 64};
  if (p == nullptr || !proto::build_phub_frame(a, h, std::span(body_.data(), body_bytes), std::span(p, len))) {
    rte_pktmbuf_free(m);
    return 0;
  }
  store_be<uint16_t>(p + proto::kEthBytes + proto::kIpv4Bytes + kUdpChecksumOffset, 0);  // the stamp goes in last
  const uint64_t stamp = rte_rdtsc();
  store_be<uint64_t>(p + proto::kFrameHeadersBytes + kBodyStampOffset, stamp);
  return send_one(m) ? stamp : 0;
}

}  // namespace phub::probe
