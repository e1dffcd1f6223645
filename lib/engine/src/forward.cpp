// Hub forwards of hierarchical jobs (docs/hierarchy.md): a rack hub sends its rack's partial of a segment
// to the chunk's home hub and resends it until the home's result comes back; the home counts one partial
// per (rack, piece), completes the segment and sends its result to every rack's hub. All on the lcore
// that owns the chunk on every hub.
#include <rte_mbuf.h>

#include <cstring>

#include "messages.hpp"
#include "phub/agg/nonfinite.hpp"
#include "phub/base/bytes.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/arp_mbuf.hpp"
#include "phub/engine/hierarchy.hpp"
#include "lcore.hpp"
#include "forwarder.hpp"
#include "job_handler.hpp"
#include "phub/proto/arp_icmp.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/hub_link.hpp"
#include "rx_frame.hpp"

namespace phub::engine {
namespace {

// The least time between two ARP requests of one lcore for one hub.
constexpr uint64_t kArpIntervalUs = 10000;

constexpr uint64_t kMacKnown = uint64_t{1} << 63;

uint64_t pack_mac(const MacAddr& mac) noexcept {
  uint64_t v = 0;
  for (uint8_t b : mac) v = v << 8 | b;
  return v | kMacKnown;
}

MacAddr unpack_mac(uint64_t v) noexcept {
  MacAddr mac{};
  for (int i = 5; i >= 0; --i, v >>= 8) mac[static_cast<size_t>(i)] = static_cast<uint8_t>(v);
  return mac;
}

}  // namespace

void Lcore::learn_hub_mac(const Snapshot& s, uint32_t ip, const MacAddr& mac) noexcept {
  if ((mac[0] & 0x01) != 0) return;  // never a group address
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const JobPlan& plan = *s.jobs[j];
    if (plan.hub == nullptr) continue;
    for (size_t r = 0; r < plan.hub->hubs.size(); ++r) {
      if (r != plan.hub->my_rack && plan.hub->hubs[r].ipv4 == ip) {
        uint64_t unknown = 0;  // only a hub not known yet: ARP never moves a known one (an attacker's claim)
        (void)s.runtimes[j]->hub_macs[r].compare_exchange_strong(unknown, pack_mac(mac), std::memory_order_relaxed);
      }
    }
  }
}

void Forwarder::on_tick() noexcept {
  // Peer hubs' MACs are asked for before the first forward needs them.
  for (uint16_t rack = 0; rack < plan.math.hub.racks; ++rack) {
    if (rack != plan.math.hub.my_rack) (void)resolve_hub(rack);
  }
  send_hub_states();
}

void Forwarder::send_result_to_racks(const Chunk& c, uint32_t seg) noexcept {
  for (uint16_t rack = 0; rack < plan.math.hub.racks; ++rack) {
    if (rack != plan.math.hub.my_rack) (void)send_hub_result(c, c.cur, c.round, seg, rack);
  }
}

bool Forwarder::resolve_hub(uint16_t rack) noexcept {
  Peer& hub = lj.hub_peer(rack);
  const uint64_t known = lj.hub_mac[rack].load(std::memory_order_relaxed);
  if (known != 0) {
    const MacAddr mac = unpack_mac(known);
    if (!hub.known || !mac_equal(mac, hub.mac)) {
      hub.mac = mac;
      hub.known = true;
      hub.l234_generation = 0;  // the cached headers name the old MAC
    }
    return true;
  }
  uint64_t& asked = lj.hub_arp_tsc[rack];
  if (asked != 0 && io.now_tsc - asked < io.hz / 1'000'000 * kArpIntervalUs) return false;
  asked = io.now_tsc | 1;
  const PortInfo& pi = io.snap->ports[hub.port];
  rte_mbuf* m = rte_pktmbuf_alloc(io.res.hdr_pool);
  if (m == nullptr) return false;
  auto* p = rte_pktmbuf_append(m, proto::kArpFrameBytes);
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    return false;
  }
  (void)proto::build_arp_request(pi.mac, pi.ipv4, plan.hub->hubs[rack].ipv4,
                                 std::span<std::byte, proto::kArpFrameBytes>(reinterpret_cast<std::byte*>(p),
                                                                             proto::kArpFrameBytes));
  io.tx[hub.port].add(m, io.counters);
  return false;
}

bool Forwarder::transmit_forward(uint16_t rack, proto::Header h, ResultBuf* from, const std::byte* payload,
                                  std::span<const std::byte> tail) noexcept {
  // A hub_state carries the job's forward MAC (its echo proves it fresh); every forward goes under the link's
  // keys and numbering, which need both ends' nonces.
  HubLink* link = h.opcode == proto::Opcode::hub_state ? nullptr : &lj.hub_links[rack];
  if (link != nullptr && !link->keyed) {
    io.count_drop(lj, Drop::fwd_link_unready);
    return false;
  }
  if (!resolve_hub(rack)) {
    io.count_drop(lj, Drop::hub_unresolved);
    return false;
  }
  Peer& hub = lj.hub_peer(rack);
  rte_mbuf* m = nullptr;
  rte_mbuf* ext = nullptr;
  if (!job.alloc_payload_mbufs(hub.port, from != nullptr && tail.empty(), m, ext)) return false;
  const bool chain = ext != nullptr;
  std::byte* p = job.write_l234(m, hub, proto::kHeaderBytes + h.payload_bytes);
  if (p == nullptr) {
    rte_pktmbuf_free(ext);
    return false;
  }
  const uint64_t number = link != nullptr ? link->tx_seq++ : 0;
  h.seq = link != nullptr ? static_cast<uint32_t>(number) : io.seq++;
  auto wire = std::span<std::byte, proto::kHeaderBytes>(p, proto::kHeaderBytes);
  proto::write_header(h, wire);
  const auto seal = [&](std::span<const std::byte> bytes) {
    if (link != nullptr) {
      proto::seal_link_forward(plan.key, link->tx_key, number, wire, bytes);
    } else {
      proto::seal_fwd(plan.key, plan.hub->payload_key, wire, bytes);
    }
  };
  if (chain) {
    seal(std::span(payload, h.payload_bytes));
    rte_mbuf_ext_refcnt_update(&from->shinfo, 1);
    job.attach_result(ext, from, static_cast<size_t>(payload - from->data), h.payload_bytes);
    job.chain_payload(m, ext);
    return io.queue_tx(lj, hub.port, m);
  }
  // Copied (a weights request is a header only): the payload and its tail, sealed as they lie in the frame.
  auto* dst = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, h.payload_bytes));
  if (dst == nullptr && h.payload_bytes != 0) {
    rte_pktmbuf_free(m);
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  const size_t elems = h.payload_bytes - tail.size();
  if (elems != 0) std::memcpy(dst, payload, elems);
  if (!tail.empty()) std::memcpy(dst + elems, tail.data(), tail.size());
  seal(std::span<const std::byte>(dst, h.payload_bytes));
  if (elems != 0 && proto::opcode_is_forward(h.opcode) && h.opcode != proto::Opcode::fwd_hparams) {
    bump(lj.counters.forwards_copied);
  }
  return io.queue_tx(lj, hub.port, m);
}

void Forwarder::send_partial(Chunk& c, uint32_t seg, bool retransmit) noexcept {
  const JobMath& m = plan.math;
  // The fp32 sum lives in out[cur] (fp32 allreduce): pieces point into it. Else it is the accumulator.
  ResultBuf* from = sums_in_result(m) ? LcoreJob::buf(c, c.cur) : nullptr;
  const float* sum = forward_source(m, c);
  // A ps round carries what its ranks said of it to the home, which runs the optimizer: the hyperparameter set
  // (the tail; the home is sent the set first, until it acknowledged it) and a declaration.
  std::array<std::byte, proto::kTailBytes> tail_bytes{};
  std::span<const std::byte> tail;
  if (m.ps && c.hp_id != 0) {
    send_hparams_to(c.home, c.hp_id);
    store_be<uint64_t>(tail_bytes.data(), c.hp_id);
    tail = tail_bytes;
  }
  for (uint16_t piece = 0; piece < pieces_of(m, c, seg); ++piece) {
    const uint32_t n = piece_elems(m, c, seg, piece);
    proto::Header h;
    h.opcode = proto::Opcode::fwd_partial;
    h.flags = static_cast<uint16_t>((retransmit ? proto::flag::retransmit : 0) | (m.ps && c.skip ? proto::flag::nonfinite : 0) |
                                    (tail.empty() ? 0 : proto::flag::tail));
    h.dtype = Dtype::fp32;
    h.job_id = plan.cfg.id;
    h.rank = m.hub.my_rack;
    h.payload_bytes = static_cast<uint16_t>(n * sizeof(float) + tail.size());
    h.round = c.round;
    h.chunk_id = c.id;
    h.elem_offset = piece_offset(m, seg, piece);
    h.elem_count = static_cast<uint16_t>(n);
    h.epoch = lj.epoch;
    if (!transmit_forward(c.home, h, from, reinterpret_cast<const std::byte*>(sum + h.elem_offset), tail)) {
      continue;  // counted; the resend timer tries again
    }
    bump(lj.counters.partials_sent);
    bump(lj.hub_counters[c.home].partials_sent);
    if (retransmit) {
      bump(lj.counters.partials_retransmitted);
      bump(lj.hub_counters[c.home].partials_retransmitted);
    }
  }
  // A new wait for the home's result: one RTO of the timer towards the home (lcore_job.hpp's hub_resend).
  // Its first result gives a round-trip sample unless a piece was resent (Karn's rule).
  if (c.forward_due_tsc == 0) {
    c.forward_backoff_tsc = lj.hub_resend[c.home].rto();
    c.forward_due_tsc = io.now_tsc + c.forward_backoff_tsc;
    c.forward_sent_tsc = retransmit ? 0 : io.now_tsc;
    c.forward_samples = lj.hub_resend[c.home].samples();
  }
}

void Forwarder::publish_resend_timer(uint16_t rack) noexcept {
  const ResendTimer& t = lj.hub_resend[rack];
  __atomic_store_n(&lj.hub_counters[rack].srtt_tsc, t.srtt(), __ATOMIC_RELAXED);
  __atomic_store_n(&lj.hub_counters[rack].rto_tsc, t.rto(), __ATOMIC_RELAXED);
}

bool Forwarder::send_hub_result(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rack) noexcept {
  proto::Header h = result_header(plan, c, buf, round, seg, rack, lj.epoch);
  h.opcode = proto::Opcode::fwd_result;
  const size_t off_bytes = static_cast<size_t>(h.elem_offset) * dtype_bytes(plan.math.out_dtype);
  if (!transmit_forward(rack, h, LcoreJob::buf(c, buf), c.out[buf] + off_bytes)) return false;
  bump(lj.counters.hub_results_sent);
  return true;
}

void Forwarder::resend_forwards(Chunk& c, uint64_t now) noexcept {
  const JobMath& m = plan.math;
  const auto unanswered = [&](uint32_t seg) { return locally_complete(m, c, seg) && !segment_done(m, c, seg); };
  bool waiting = false;
  for (uint32_t seg = 0; seg < c.segments && !waiting; ++seg) waiting = unanswered(seg);
  if (!waiting) {
    c.forward_due_tsc = 0;
    return;
  }
  // The home is still sending this rack results (of other chunks): it is alive and working through its queue
  // (its uplink carries its own partials and every rack's results), and this chunk's answer is most likely
  // queued behind them. The resend waits until the home has been silent for a whole backoff: a lost partial
  // or result is still sent again, once the home has nothing else left to send here.
  const uint64_t heard = lj.hub_result_tsc[c.home];
  if (heard != 0 && now - heard < c.forward_backoff_tsc) {
    c.forward_due_tsc = heard + c.forward_backoff_tsc;
    bump(lj.counters.resends_postponed);
    return;
  }
  for (uint32_t seg = 0; seg < c.segments; ++seg) {
    if (unanswered(seg)) send_partial(c, seg, true);
  }
  // Timed out: no sample from this wait, and the next one (and the timer, until its next sample) twice as long.
  c.forward_sent_tsc = 0;
  c.forward_backoff_tsc = lj.hub_resend[c.home].timed_out(c.forward_backoff_tsc, c.forward_samples);
  c.forward_due_tsc = now + c.forward_backoff_tsc;
  publish_resend_timer(c.home);
}

void Forwarder::on_forward(RxFrame& rx) noexcept {
  const HubPlan& hub = *plan.hub;
  const JobMath& m = plan.math;
  const proto::Header& h = rx.hdr;
  const bool init = h.opcode == proto::Opcode::fwd_init;
  if (init && !m.ps) return io.count_drop(lj, Drop::unexpected_opcode);
  // Partials and inits go to the home and name their sending rack (an init's payload only rank 0's); a
  // result names the rack it is addressed to (this one).
  const bool to_home = h.opcode != proto::Opcode::fwd_result;
  if (to_home ? (h.rank >= m.hub.racks || h.rank == m.hub.my_rack) : h.rank != m.hub.my_rack) {
    return io.count_drop(lj, Drop::fwd_bad_rack);
  }
  if (init && h.elem_count != 0 && h.rank != m.hub.rack_of_rank[0]) return io.count_drop(lj, Drop::fwd_bad_rack);
  // A hyperparameter set (or its acknowledgement) names no chunk: its chunk_id and elem_offset hold the set's
  // id, its rank the sending rack either way.
  const bool set = h.opcode == proto::Opcode::fwd_hparams;
  if (!set && h.chunk_id >= plan.layout.chunk_count()) return io.count_drop(lj, Drop::bad_chunk);
  const proto::ChunkInfo& ci = plan.layout.chunk(set ? 0 : h.chunk_id);
  if (!set && ci.owner != plan.first_owner + io.res.index) return io.count_drop(lj, Drop::wrong_owner);
  const uint16_t home = set ? m.hub.my_rack : m.hub.homes->home(h.chunk_id);
  if (to_home ? home != m.hub.my_rack : home == m.hub.my_rack) return io.count_drop(lj, Drop::fwd_not_home);
  const uint16_t from = to_home ? h.rank : home;
  const HubPlan::Hub& sender = hub.hubs[from];
  if (rx.ip.src != sender.ipv4 || rx.udp.src_port != sender.port_base + io.res.index) {
    return io.count_drop(lj, Drop::fwd_wrong_source);
  }
  // Nothing is taken from a peer until its hub_state showed the same hierarchy (docs/hierarchy.md).
  switch (__atomic_load_n(&lj.hub_counters[from].fingerprint_state, __ATOMIC_RELAXED)) {
    case HubPeerCounters::kFingerprintEqual:
      break;
    case HubPeerCounters::kFingerprintDiffers:
      return io.count_drop(lj, Drop::fwd_fingerprint_mismatch);
    default:
      return io.count_drop(lj, Drop::fwd_peer_unverified);
  }
  // Authentic under the link's keys (so of both ends' present lives) and not seen before on the link.
  HubLink& link = lj.hub_links[from];
  if (!link.keyed) return io.count_drop(lj, Drop::fwd_peer_unverified);
  switch (proto::open_link_forward(plan.key, link.rx_key, link.rx_window, rx.msg.first<proto::kHeaderBytes>(), rx.payload)) {
    case proto::LinkVerdict::ok:
      break;
    case proto::LinkVerdict::bad_mac:
      return io.count_drop(lj, Drop::fwd_bad_mac);
    case proto::LinkVerdict::replayed:
      return io.count_drop(lj, Drop::fwd_replayed);
  }
  if (h.epoch != lj.epoch) return io.count_drop(lj, Drop::epoch_mismatch);
  if (h.opcode == proto::Opcode::fwd_hparams) return on_fwd_hparams(rx);
  // Fresh, authentic and of this epoch, from the hub's address: its MAC is where forwards to it go, and it
  // answered now. Nothing recorded earlier gets this far.
  lj.hub_mac[from].store(pack_mac(rx.l2.src), std::memory_order_relaxed);
  HubPeerCounters& peer = lj.hub_counters[from];
  __atomic_store_n(&peer.last_answer_tsc, io.now_tsc, __ATOMIC_RELAXED);
  if ((h.flags & proto::flag::retransmit) != 0) bump(lj.counters.retransmits_seen);

  Chunk& c = lj.chunk(ci.local_index);
  const uint32_t seg = h.elem_offset / m.segment_elems;
  const uint32_t in_seg = h.elem_offset % m.segment_elems;
  if (seg >= c.segments) return io.count_drop(lj, Drop::fwd_bad_piece);
  if (init) {
    // A segment of rank 0's init, or (no elements, offset 0) a request for the chunk's weights.
    const bool fits = h.elem_count == 0 ? h.elem_offset == 0 : in_seg == 0 && h.elem_count == segment_elems(m, c, seg);
    if (!fits) return io.count_drop(lj, Drop::fwd_bad_piece);
    return on_fwd_init(rx, c, seg);
  }
  if (h.opcode == proto::Opcode::fwd_partial) {
    const auto piece = static_cast<uint16_t>(in_seg / m.hub.piece_elems);
    if (in_seg % m.hub.piece_elems != 0 || piece >= pieces_of(m, c, seg) || h.elem_count != piece_elems(m, c, seg, piece)) {
      return io.count_drop(lj, Drop::fwd_bad_piece);
    }
    bump(peer.partials_received);
    return on_partial(rx, c, seg, piece);
  }
  if (in_seg != 0 || h.elem_count != segment_elems(m, c, seg)) return io.count_drop(lj, Drop::fwd_bad_piece);
  if (h.dtype != m.out_dtype) return io.count_drop(lj, Drop::dtype_mismatch);
  bump(peer.results_received);
  on_hub_result(rx, c, seg);
}

void Forwarder::on_partial(RxFrame& rx, Chunk& c, uint32_t seg, uint16_t piece) noexcept {
  const proto::Header& h = rx.hdr;
  if (job.deferred(rx, c)) return;
  if (lj.capture != nullptr) job.capture_segment(c, seg);  // before the next round can change it
  const bool opens_round = c.first_tsc == 0;
  RoundIntent intent;
  if (plan.math.ps) {
    intent.nonfinite = (h.flags & proto::flag::nonfinite) != 0;
    intent.sets = &lj.hparams;
    if ((h.flags & proto::flag::tail) != 0) {
      intent.hparams_id = load_be<uint64_t>(rx.payload.data() + rx.payload.size() - proto::kTailBytes);
    }
  }
  const PushResult result =
      contribute_partial(plan.math, c, h.rank, h.round, seg, piece, rx.payload.data(), io.now_tsc, intent);
  if (opens_round && c.first_tsc != 0) bump(lj.open_rounds);
  switch (result) {
    case PushResult::accepted:
    case PushResult::rack_complete:  // (a partial never completes a rack's own part)
      bump(lj.counters.partials_received);
      break;
    case PushResult::segment_complete:
      bump(lj.counters.partials_received);
      job.complete_segment(c, seg);
      break;
    case PushResult::duplicate:
      bump(lj.counters.duplicates);
      break;
    case PushResult::duplicate_complete:  // the rack hub lost the result: its resent partial asks again
      bump(lj.counters.duplicates);
      if (send_hub_result(c, c.cur, c.round, seg, h.rank)) bump(lj.counters.hub_results_resent);
      break;
    case PushResult::previous_round:
      bump(lj.counters.duplicates);
      if (send_hub_result(c, c.cur ^ 1, h.round, seg, h.rank)) bump(lj.counters.hub_results_resent);
      break;
    case PushResult::ahead:
      io.count_drop(lj, Drop::round_ahead);
      break;
    case PushResult::behind:
      io.count_drop(lj, Drop::round_behind);
      break;
    case PushResult::not_initialized:
      io.count_drop(lj, Drop::not_initialized);
      break;
    case PushResult::bad_round:
      io.count_drop(lj, Drop::bad_request);
      break;
    case PushResult::hparams_unknown:  // the rack hub sends the set again with its next resend of the partial
      io.count_drop(lj, Drop::hparams_unknown);
      break;
    case PushResult::hparams_mismatch:  // racks disagree: the round waits (stalled reports reach the ranks)
      io.count_drop(lj, Drop::hparams_mismatch);
      break;
  }
}

void Forwarder::on_hub_result(RxFrame& rx, Chunk& c, uint32_t seg) noexcept {
  if (job.deferred(rx, c)) return;
  // ps: a result labelled with the round before the current one holds the home's newest weights.
  if (plan.math.ps && rx.hdr.round == prev_round(plan.math, c.round)) return on_hub_weights(rx, c, seg);
  if (lj.capture != nullptr) job.capture_segment(c, seg);
  // A round the home skipped (a rank of any rack declared it non-finite): this rack's results say so too.
  if (plan.math.ps && rx.hdr.round == c.round && (rx.hdr.flags & proto::flag::nonfinite) != 0) c.skip = true;
  switch (accept_result(plan.math, c, rx.hdr.round, seg, rx.payload.data())) {
    case ResultArrival::completed:
      bump(lj.counters.hub_results_received);
      lj.hub_result_tsc[c.home] = io.now_tsc;
      if (c.forward_sent_tsc != 0) {  // the first answer of a wait whose partials went out once
        lj.hub_resend[c.home].sample(io.now_tsc - c.forward_sent_tsc);
        c.forward_sent_tsc = 0;
        publish_resend_timer(c.home);
      }
      job.complete_segment(c, seg);
      break;
    case ResultArrival::duplicate:
      bump(lj.counters.duplicates);
      break;
    case ResultArrival::other_round:
    case ResultArrival::not_forwarded:
      io.count_drop(lj, Drop::fwd_stale);
      break;
  }
}

}  // namespace phub::engine
