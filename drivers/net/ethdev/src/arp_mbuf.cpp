// ARP requests and replies in mbufs.
#include "phub/drivers/arp_mbuf.hpp"

#include <algorithm>
#include <cstring>
#include <span>

namespace phub::drivers {
namespace {

// m's data made a zeroed minimum-size frame; the ARP frame's bytes at its start (nullptr if m is too small).
std::span<std::byte, proto::kArpFrameBytes> zeroed_frame(rte_mbuf* m) noexcept {
  auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, kMinEthFrameBytes));
  if (p != nullptr) std::memset(p, 0, kMinEthFrameBytes);
  return std::span<std::byte, proto::kArpFrameBytes>(p, proto::kArpFrameBytes);
}

}  // namespace

rte_mbuf* alloc_arp_request(rte_mempool* pool, const MacAddr& my_mac, uint32_t my_ip, uint32_t target_ip) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  const auto frame = zeroed_frame(m);
  if (frame.data() == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  (void)proto::build_arp_request(my_mac, my_ip, target_ip, frame);
  return m;
}

rte_mbuf* alloc_arp_reply(rte_mempool* pool, const proto::Arp& req, const MacAddr& my_mac, uint32_t my_ip) noexcept {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  if (!rewrite_as_arp_reply(m, req, my_mac, my_ip)) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  return m;
}

bool rewrite_as_arp_reply(rte_mbuf* m, const proto::Arp& req, const MacAddr& my_mac, uint32_t my_ip) noexcept {
  // rte_pktmbuf_reset puts the data after the default headroom (or at the buffer's start if it is shorter).
  const uint16_t room = static_cast<uint16_t>(m->buf_len - std::min<uint16_t>(RTE_PKTMBUF_HEADROOM, m->buf_len));
  if (m->nb_segs != 1 || !RTE_MBUF_DIRECT(m) || room < kMinEthFrameBytes) return false;
  rte_pktmbuf_reset(m);
  (void)proto::build_arp_reply(req, my_mac, my_ip, zeroed_frame(m));
  return true;
}

std::optional<proto::Arp> arp_of(const rte_mbuf* m) noexcept {
  const std::span<const std::byte> frame(rte_pktmbuf_mtod(m, const std::byte*), m->data_len);
  auto l2 = proto::parse_l2(frame);
  if (!l2) return std::nullopt;
  auto arp = proto::parse_arp(frame, *l2);
  if (!arp) return std::nullopt;
  return *arp;
}

}  // namespace phub::drivers
