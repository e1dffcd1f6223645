// The lcore's receive path: classify each frame (ARP, ICMP echo, phub UDP), run the job's gate once, hand a
// frame that landed on the wrong queue to the owning lcore, and give the rest to the job's handler
// (job_handler.hpp).
#include <rte_cycles.h>
#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "phub/agg/nonfinite.hpp"
#include "phub/base/bytes.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/arp_mbuf.hpp"
#include "lcore.hpp"
#include "phub/proto/arp_icmp.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "phub/proto/session_packet.hpp"
#include "gate.hpp"
#include "job_handler.hpp"
#include "peer_address.hpp"
#include "rx_frame.hpp"

namespace phub::engine {


namespace {


// What a handed-off frame carries in its hash field (the RSS hash is not read after the gate): the job whose
// slot it holds (its id, and its index in the sender's snapshot), and the gate's verdict (passed, and under
// which key) with the low bits of the sender's snapshot generation. The owner takes the verdict under the
// same snapshot only: a reload in between (a secret changed) gates the frame again.
struct HandoffStamp {
  uint32_t job_id = 0;
  uint16_t job_index = 0;
  bool previous_key = false;
  uint8_t generation = 0;
};

void stamp(rte_mbuf* m, const HandoffStamp& h) noexcept {
  m->hash.fdir.lo = h.job_id;
  m->hash.fdir.hi = h.job_index | (h.previous_key ? 1u << 16 : 0u) | static_cast<uint32_t>(h.generation) << 24;
}

// A worker's message about one of the job's chunks: what the chunk-to-interface map sends to the chunk's port.
bool chunk_message(proto::Opcode op) noexcept {
  return op == proto::Opcode::push || op == proto::Opcode::init || op == proto::Opcode::rerequest ||
         op == proto::Opcode::pull;
}

HandoffStamp stamp_of(const rte_mbuf* m) noexcept {
  const uint32_t hi = m->hash.fdir.hi;
  return HandoffStamp{m->hash.fdir.lo, static_cast<uint16_t>(hi & 0xffff), (hi & (1u << 16)) != 0,
                      static_cast<uint8_t>(hi >> 24)};
}

}  // namespace

void Lcore::handle_frame(RxFrame& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept {
  io_.outcome = Outcome::none;
  io_.timing = --stage_countdown_ == 0;
  if (io_.timing) start_timing();
  route_frame(rx, m, port, s, from_ring);
  if (io_.timing) finish_timing(rx);
  switch (io_.outcome) {
    case Outcome::taken: bump(io_.counters.accepted); break;
    case Outcome::dropped: bump(io_.counters.frames_dropped); break;
    case Outcome::handed_off: break;  // redirected_out
    case Outcome::none: bump(io_.counters.unaccounted); break;
  }
}

void Lcore::start_timing() noexcept {
  stage_countdown_ = kStageSampleEvery;
  stage_start_ = rte_rdtsc();
  stage_parsed_ = stage_gated_ = 0;
  io_.stage_seal_tsc = 0;
  stage_tx_before_ = io_.counters.tx_burst_tsc;
}

void Lcore::finish_timing(const RxFrame& rx) noexcept {
  io_.timing = false;
  // Only a push this lcore summed: its header parsed and its gate passed here in this frame.
  if (stage_gated_ == 0 || io_.outcome != Outcome::taken || rx.hdr.opcode != proto::Opcode::push) return;
  const uint64_t handler = rte_rdtsc() - stage_gated_;
  const uint64_t other = io_.stage_seal_tsc + (io_.counters.tx_burst_tsc - stage_tx_before_);
  bump(io_.counters.stage_samples);
  bump(io_.counters.stage_parse_tsc, stage_parsed_ - stage_start_);
  bump(io_.counters.stage_gate_tsc, stage_gated_ - stage_parsed_);
  bump(io_.counters.stage_sum_tsc, handler > other ? handler - other : 0);
  bump(io_.counters.stage_seal_tsc, io_.stage_seal_tsc);
}

void Lcore::route_frame(RxFrame& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept {
  rx.m = m;
  rx.port = port;
  if (rx.port == 0xffff) {
    io_.count_drop(Drop::not_for_us);
    rte_pktmbuf_free(m);
    return;
  }
  if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
    io_.count_drop(Drop::rx_scattered);
    rte_pktmbuf_free(m);
    return;
  }
  rx.frame = std::span(rte_pktmbuf_mtod(m, std::byte*), m->data_len);
  const PortInfo& pi = s.ports[rx.port];

  auto drop = [&](Drop d) {
    io_.count_drop(d);
    rte_pktmbuf_free(m);
  };
  auto malformed = [&](proto::ParseError e) {
    io_.count_malformed(e);
    rte_pktmbuf_free(m);
  };

  // Parsed in place into rx (no copies of structs written field by field a moment before).
  if (auto e = proto::parse_l2_into(rx.frame, rx.l2)) return malformed(*e);
  if (!mac_equal(rx.l2.dst, pi.mac) && !mac_equal(rx.l2.dst, kBroadcastMac)) {
    return drop(Drop::not_for_us);
  }
  if (rx.l2.ether_type == proto::kEtherTypeArp) {
    handle_arp(rx, s);
    rte_pktmbuf_free(m);
    return;
  }
  if (rx.l2.ether_type != proto::kEtherTypeIpv4) return drop(Drop::non_ip);

  // Checksum flags count only on a port that asked for the offload (PortInfo): elsewhere they are not the PMD's.
  const bool ip_good = pi.rx_ipv4_checksum_offload &&
                       (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  if (auto e = proto::parse_ipv4_into(rx.frame, rx.l2, !ip_good, rx.ip)) return malformed(*e);
  if (rx.ip.dst != pi.ipv4) return drop(Drop::not_for_us);
  if (rx.ip.protocol == proto::kIpProtoIcmp) return handle_icmp(m, rx, s);
  if (rx.ip.protocol != proto::kIpProtoUdp) return drop(Drop::ip_other_protocol);

  if (auto e = proto::parse_udp_into(rx.frame, rx.ip, rx.udp)) return malformed(*e);
  // The PMD's verdict when it has one (GOOD, BAD, or NONE: the data is known intact). UNKNOWN (no checksum
  // offload: af_packet, memif, ring): checked here, over the frame, one segment since the linearise above.
  // A 0 field is no checksum (IPv4) and accepted.
  const uint64_t l4 = pi.rx_udp_checksum_offload ? m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK
                                                 : RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN;
  if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD ||
      (l4 == RTE_MBUF_F_RX_L4_CKSUM_UNKNOWN && pi.verify_udp_checksum && !proto::udp_checksum_ok(rx.frame, rx.ip))) {
    return drop(Drop::udp_checksum_bad);
  }
  const uint16_t job = s.port_to_job[rx.udp.dst_port];
  if (job == 0) return drop(Drop::unknown_port);
  const auto job_index = static_cast<uint16_t>(job - 1);
  const auto owner = static_cast<uint16_t>(rx.udp.dst_port - s.jobs[job_index]->cfg.port_base);
  const bool mine = owner == io_.res.index;
  if (!mine && (from_ring || owner >= io_.res.outbox.size() || io_.res.outbox[owner] == nullptr)) return drop(Drop::wrong_owner);
  rx.msg = std::span<const std::byte>(rx.frame).subspan(rx.udp.payload_offset, rx.udp.payload_bytes);
  if (auto e = proto::parse_header_into(rx.msg, rx.hdr)) return malformed(*e);
  rx.payload = rx.msg.subspan(proto::kHeaderBytes);
  if (mine) bump(io_.counters.rx_messages[static_cast<size_t>(rx.hdr.opcode)]);
  if (io_.timing) stage_parsed_ = rte_rdtsc();
  // From here on the UDP port names the job: drops are counted against it.
  if (!pass_gate(rx, s, job_index, owner, from_ring)) return rte_pktmbuf_free(m);
  if (rx.redirect_ipv4 != 0) return handler(s, job_index).redirect_join(m, rx);
  if (!mine) return hand_off(m, s, job_index, owner, pi.port_id, rx.previous_key);
  if (io_.timing) stage_gated_ = rte_rdtsc();
  if (rx.port != io_.res.home_ports[io_.res.index] && s.jobs[job_index]->cfg.interface_map && chunk_message(rx.hdr.opcode)) {
    // The job's map sends this lcore's chunks to its home port; the worker sent this one elsewhere (it does not
    // follow the map: one address for every chunk). Handled all the same; a hand-off, if any, was counted too.
    bump(s.lcore_jobs[io_.res.index][job_index]->counters.off_interface);
  }
  handler(s, job_index).handle(m, rx);
}

bool Lcore::pass_gate(RxFrame& rx, const Snapshot& s, uint16_t job_index, uint16_t owner, bool from_ring) noexcept {
  LcoreJob& lj = *s.lcore_jobs[io_.res.index][job_index];
  rx.credited = nullptr;
  rx.session = nullptr;
  rx.redirect_ipv4 = 0;
  if (from_ring) {
    const HandoffStamp st = stamp_of(rx.m);
    if (st.generation == static_cast<uint8_t>(s.generation)) {
      // The sender's verdict: the tag or handshake is not checked again. A join's payload is read again (its
      // form was checked with its handshake).
      rx.previous_key = st.previous_key;
      if (rx.hdr.opcode != proto::Opcode::join) return true;
      if (auto j = proto::parse_join_payload(rx.payload)) {
        rx.join = *j;
        return true;
      }
      io_.count_drop(lj, Drop::bad_request);
      return false;
    }
  }
  GateSite site;
  if (owner != io_.res.index) {
    const uint16_t home = owner < io_.res.home_ports.size() ? io_.res.home_ports[owner] : rx.port;
    site = GateSite{.owner = false,
                    .owner_board = s.lcore_jobs[owner][job_index]->session_board.get(),
                    .owner_home_ipv4 = s.jobs[job_index]->cfg.interface_map && home != rx.port ? s.ports[home].ipv4 : 0};
  }
  const GateVerdict v = gate_packet(GatePacket{rx.hdr, rx.msg, rx.ip.src}, *s.jobs[job_index], io_.now_tsc, site,
                                    [&s](uint32_t id) { return s.job_by_id(id) >= 0; });
  if (!v.passed()) {
    io_.count_drop(lj, v.drop);
    return false;
  }
  rx.previous_key = v.previous_key;
  rx.join = v.join;
  if (v.answer == GateAnswer::redirect) rx.redirect_ipv4 = v.redirect_ipv4;
  return true;
}

void Lcore::hand_off(rte_mbuf* m, const Snapshot& s, uint16_t job_index, uint16_t owner, uint16_t port_id,
                     bool previous_key) noexcept {
  // Each job may hold only its share of the slots of the rings towards the owner: a flood of one job is
  // dropped against that job, and the other jobs' frames always find a slot.
  LcoreJob& at_owner = *s.lcore_jobs[owner][job_index];
  const uint32_t share = __atomic_load_n(&at_owner.handoff_share_slots, __ATOMIC_RELAXED);
  if (at_owner.handoff_held.fetch_add(1, std::memory_order_relaxed) >= share) {
    at_owner.handoff_held.fetch_sub(1, std::memory_order_relaxed);
    io_.count_drop(*s.lcore_jobs[io_.res.index][job_index], Drop::handoff_share_full);
    return rte_pktmbuf_free(m);
  }
  m->port = port_id;  // some PMDs (net_ring) leave the sender's port id here
  stamp(m, HandoffStamp{s.jobs[job_index]->cfg.id, job_index, previous_key, static_cast<uint8_t>(s.generation)});
  if (rte_ring_sp_enqueue(io_.res.outbox[owner], m) != 0) {
    at_owner.handoff_held.fetch_sub(1, std::memory_order_relaxed);
    io_.count_drop(Drop::ring_full);
    return rte_pktmbuf_free(m);
  }
  bump(io_.counters.redirected_out);
  io_.settle(Outcome::handed_off);
}

void Lcore::give_back_handoff_slot(const rte_mbuf* m, const Snapshot& s) noexcept {
  // The job by the index the sender saw, else by id (a reload between the two snapshots moved it). A job
  // gone since holds nothing here; one whose LcoreJob was replaced starts from 0, hence no underflow.
  const HandoffStamp st = stamp_of(m);
  int j = st.job_index < s.jobs.size() && s.jobs[st.job_index]->cfg.id == st.job_id ? static_cast<int>(st.job_index)
                                                                                     : s.job_by_id(st.job_id);
  if (j < 0) return;
  std::atomic<uint32_t>& held = s.lcore_jobs[io_.res.index][static_cast<size_t>(j)]->handoff_held;
  uint32_t v = held.load(std::memory_order_relaxed);
  while (v != 0 && !held.compare_exchange_weak(v, v - 1, std::memory_order_relaxed)) {
  }
}

bool Lcore::may_answer(uint16_t port, const MacAddr& src_mac, uint32_t src_ip, const Snapshot& s) noexcept {
  const PortInfo& pi = s.ports[port];
  if ((src_mac[0] & 0x01) != 0 || src_ip == 0 || (src_ip >> 28) == 0xe || src_ip == 0xffffffffu ||
      (pi.ipv4_broadcast != 0 && src_ip == pi.ipv4_broadcast)) {
    io_.count_drop(Drop::reply_source_refused);
    return false;
  }
  const config::Limits& l = s.config->limits;
  if (l.arp_icmp_per_s == 0) return true;
  AnswerBucket& b = answers_[port];
  const double burst = l.arp_icmp_burst;
  if (b.last_tsc == 0) {
    b.tokens = burst;
  } else if (io_.now_tsc > b.last_tsc) {
    b.tokens = std::min(burst, b.tokens + static_cast<double>(io_.now_tsc - b.last_tsc) * l.arp_icmp_per_s /
                                              static_cast<double>(s.tsc_hz));
  }
  b.last_tsc = io_.now_tsc != 0 ? io_.now_tsc : 1;
  if (b.tokens < 1.0) {
    io_.count_drop(Drop::reply_rate_limited);
    return false;
  }
  b.tokens -= 1.0;
  return true;
}

void Lcore::handle_arp(const RxFrame& rx, const Snapshot& s) noexcept {
  auto arp = proto::parse_arp(rx.frame, rx.l2);
  if (!arp) {
    io_.count_malformed(arp.error());
    return;
  }
  const PortInfo& pi = s.ports[rx.port];
  // A peer hub's MAC is learned from an ARP reply while it is unknown (the answer to this hub's request);
  // a gratuitous or unsolicited claim later changes nothing. Verified forwards keep it current.
  if (arp->op == proto::ArpOp::reply && arp->target_ip == pi.ipv4) {
    learn_hub_mac(s, arp->sender_ip, arp->sender_mac);
    return io_.take();
  }
  if (arp->op != proto::ArpOp::request || arp->target_ip != pi.ipv4) return io_.count_drop(Drop::not_for_us);
  // The answer goes to the sender hardware address: neither it nor the frame's source may be a group.
  if ((arp->sender_mac[0] & 0x01) != 0) return io_.count_drop(Drop::reply_source_refused);
  if (!may_answer(rx.port, rx.l2.src, arp->sender_ip, s)) return;
  rte_mbuf* r = drivers::alloc_arp_reply(io_.res.hdr_pool, *arp, pi.mac, pi.ipv4);
  if (r == nullptr) return io_.count_drop(Drop::no_mbuf);
  bump(io_.counters.arp_replies);
  io_.take();
  io_.tx[rx.port].add(r, io_.counters);
}

void Lcore::handle_icmp(rte_mbuf* m, RxFrame& rx, const Snapshot& s) noexcept {
  auto echo = proto::parse_icmp_echo_request(rx.frame, rx.ip);
  if (!echo) {
    io_.count_malformed(echo.error());
    rte_pktmbuf_free(m);
    return;
  }
  if (!may_answer(rx.port, rx.l2.src, rx.ip.src, s)) {
    rte_pktmbuf_free(m);
    return;
  }
  proto::icmp_echo_reply_in_place(rx.frame, rx.l2, rx.ip, *echo);
  m->ol_flags = 0;
  bump(io_.counters.icmp_replies);
  io_.take();
  io_.tx[rx.port].add(m, io_.counters);
}

}  // namespace phub::engine
