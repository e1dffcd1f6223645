// Transmit path: result segments as a header mbuf chained to the result buffer (zero-copy, refcounted),
// or copied where the port cannot chain; error replies; round completion.
#include <rte_cycles.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "lcore.hpp"
#include "job_handler.hpp"
#include "messages.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/session_packet.hpp"
#include "rx_frame.hpp"

namespace phub::engine {

bool LcoreIo::queue_tx(LcoreJob& lj, uint16_t port, rte_mbuf* m) noexcept {
  // A job's replies fill its guarantee of the transmit buffers, then borrow from the pool while it has room
  // (tenant_shares.hpp): a flood's answers are dropped against the job that provoked them, and the other
  // jobs' replies always find their guarantees.
  constexpr uint32_t kPool = tx_pool_slots(TxBuffer::kCapacity);
  constexpr uint32_t kBorrowLimit = tx_borrow_limit_slots(TxBuffer::kCapacity);
  const TxAdmit admit =
      admit_tx(lj.tx_hold, __atomic_load_n(&lj.tx_share_packets, __ATOMIC_RELAXED), tx_pool_lent, kPool, kBorrowLimit);
  if (admit == TxAdmit::refused) {
    rte_pktmbuf_free(m);
    count_drop(lj, Drop::tx_share_full);
    return false;
  }
  tx[port].add(m, counters, &lj.tx_hold, admit == TxAdmit::borrowed);
  return true;
}

rte_mbuf* JobHandler::start_message(Peer& peer, const proto::Header& h, PeerSession* session) noexcept {
  const bool chain = io.snap->ports[peer.port].zero_copy_tx;
  rte_mbuf* m = rte_pktmbuf_alloc(chain || h.payload_bytes == 0 ? io.res.hdr_pool : io.res.copy_pool);
  if (m == nullptr) {
    io.count_drop(lj, Drop::no_mbuf);
    return nullptr;
  }
  return write_message(m, peer, h, session) ? m : nullptr;
}

std::byte* JobHandler::write_l234(rte_mbuf* m, Peer& peer, size_t udp_payload_bytes, uint16_t src_udp_port) noexcept {
  auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, proto::kFrameHeadersBytes));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    io.count_drop(lj, Drop::no_mbuf);
    return nullptr;
  }
  if (peer.l234_udp_payload != udp_payload_bytes || peer.l234_generation != io.snap->generation) {
    const PortInfo& pi = io.snap->ports[peer.port];
    proto::FlowAddrs a;
    a.src_mac = pi.mac;
    a.dst_mac = peer.mac;
    a.src_ip = pi.ipv4;
    a.dst_ip = peer.ip;
    a.src_port = src_udp_port != 0 ? src_udp_port : static_cast<uint16_t>(plan.cfg.port_base + io.res.index);
    a.dst_port = peer.udp_port;
    proto::write_eth_ipv4_udp(a, udp_payload_bytes, peer.l234);
    if (pi.tx_udp_checksum_offload) proto::seed_udp_checksum_offload(peer.l234);
    peer.l234_udp_payload = static_cast<uint16_t>(udp_payload_bytes);
    peer.l234_generation = io.snap->generation;
  }
  std::memcpy(p, peer.l234.data(), peer.l234.size());
  if (io.snap->ports[peer.port].tx_udp_checksum_offload) {
    // The PMD sums the datagram over every segment (a shared result payload included, which it only reads)
    // from the pseudo-header sum the template carries; without the offload the field stays 0 (no checksum).
    m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
    m->l2_len = proto::kEthBytes;
    m->l3_len = proto::kIpv4Bytes;
    m->l4_len = proto::kUdpBytes;
  }
  return p + peer.l234.size();
}

bool JobHandler::write_message(rte_mbuf* m, Peer& peer, const proto::Header& h, PeerSession* session,
                               std::span<const std::byte> payload) noexcept {
  std::byte* p = write_l234(m, peer, proto::kHeaderBytes + h.payload_bytes);
  if (p == nullptr) return false;
  auto wire = std::span<std::byte, proto::kHeaderBytes>(p, proto::kHeaderBytes);
  proto::write_header(h, wire);
  if (!seal_for(peer, session, wire, payload)) {
    rte_pktmbuf_free(m);
    return false;
  }
  return true;
}

bool JobHandler::seal_for(const Peer& peer, PeerSession* session, std::span<std::byte, proto::kHeaderBytes> wire,
                          std::span<const std::byte> payload) noexcept {
  // Timed within a frame whose stages are (stage_seal_tsc).
  struct Timed {
    bool on;
    uint64_t& cycles;
    uint64_t start;
    ~Timed() {
      if (on) cycles += rte_rdtsc() - start;
    }
  } timed{io.timing, io.stage_seal_tsc, io.timing ? rte_rdtsc() : 0};
  if (!plan.cfg.sessions) {
    if (plan.authenticated) sign_for(peer, wire);
    return true;
  }
  if (session == nullptr || !session->valid) {
    io.count_drop(lj, Drop::no_session);
    return false;
  }
  const auto opcode = static_cast<proto::Opcode>(std::to_integer<uint8_t>(wire[3]));
  const bool mac = plan.cfg.payload_mac && opcode == proto::Opcode::result;
  proto::seal_session_header(proto::server_to_worker(session->keys), wire, payload, session->reply,
                             session->next_tx_seq++, mac);
  return true;
}

proto::Header result_header(const JobPlan& plan, const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank,
                            uint16_t epoch) {
  const JobMath& m = plan.math;
  const uint32_t n = segment_elems(m, c, seg);
  proto::Header h;
  h.opcode = proto::Opcode::result;
  h.flags = static_cast<uint16_t>((m.mean && !m.ps ? proto::flag::mean : 0) |
                                  (m.ps && result_skipped(c, buf) ? proto::flag::nonfinite : 0));
  h.dtype = m.out_dtype;
  h.job_id = plan.cfg.id;
  h.rank = rank;
  h.payload_bytes = static_cast<uint16_t>(n * dtype_bytes(m.out_dtype));
  h.round = round;
  h.chunk_id = c.id;
  h.elem_offset = segment_offset(m, seg);
  h.elem_count = static_cast<uint16_t>(n);
  h.epoch = epoch;
  return h;
}

// Point `ext` (a fresh mbuf of the data-room-0 pool) at `bytes` of the result buffer from `off_bytes`; the
// caller has counted the reference in the buffer's refcount.
void JobHandler::attach_result(rte_mbuf* ext, ResultBuf* b, size_t off_bytes, uint16_t bytes) noexcept {
  rte_pktmbuf_attach_extbuf(ext, b->data + off_bytes, b->data_iova + off_bytes, bytes, &b->shinfo);
  ext->data_len = bytes;
  ext->pkt_len = bytes;
}

// Make `ext` the second and last segment of `hdr`.
void JobHandler::chain_payload(rte_mbuf* hdr, rte_mbuf* ext) noexcept {
  hdr->next = ext;
  hdr->nb_segs = 2;
  hdr->pkt_len += ext->data_len;
}

// Fill `hdr` (a fresh header mbuf) with the result segment for `rank` and chain `ext` (a fresh mbuf of the
// data-room-0 pool) to the result buffer, or copy the payload into `hdr` when `ext` is null.
bool JobHandler::fill_result(rte_mbuf* hdr, rte_mbuf* ext, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                             uint16_t rank, Peer& peer) noexcept {
  proto::Header h = result_header(plan, c, buf, round, seg, rank, lj.epoch);
  h.seq = io.seq++;
  const size_t off_bytes = static_cast<size_t>(h.elem_offset) * dtype_bytes(plan.math.out_dtype);
  const std::span<const std::byte> payload(c.out[buf] + off_bytes, h.payload_bytes);
  checksum_result(h, payload);
  if (!write_message(hdr, peer, h, &peer.current, payload)) {
    if (ext != nullptr) rte_pktmbuf_free(ext);
    return false;
  }
  if (ext != nullptr) {
    ResultBuf* b = LcoreJob::buf(c, buf);
    rte_mbuf_ext_refcnt_update(&b->shinfo, 1);
    attach_result(ext, b, off_bytes, h.payload_bytes);
    chain_payload(hdr, ext);
    return true;
  }
  auto* dst = rte_pktmbuf_append(hdr, h.payload_bytes);
  if (dst == nullptr) {
    rte_pktmbuf_free(hdr);
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  std::memcpy(dst, c.out[buf] + off_bytes, h.payload_bytes);
  bump(io.counters.results_copied);
  return true;
}

bool JobHandler::within_amplification_limit(Peer& peer, size_t frame_bytes) noexcept {
  if (peer.proven) return true;
  if (peer.unproven_credit_bytes >= frame_bytes) {
    peer.unproven_credit_bytes -= frame_bytes;
    return true;
  }
  io.count_drop(lj, Drop::unproven_limit);
  return false;
}

namespace {

size_t result_frame_bytes(const JobPlan& plan, const Chunk& c, uint32_t seg) noexcept {
  return proto::kFrameHeadersBytes + segment_elems(plan.math, c, seg) * dtype_bytes(plan.math.out_dtype);
}

}  // namespace

bool JobHandler::send_segment(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank) noexcept {
  Peer& peer = lj.peer(rank);
  const size_t frame_bytes = result_frame_bytes(plan, c, seg);
  if (!peer.known || !within_amplification_limit(peer, frame_bytes)) return false;
  // What answers to requests may send is counted in bytes: a header-only rerequest or pull costs the job
  // the whole segment it asks for.
  if (!lj.admit_answer(io.now_tsc, io.hz, plan.answer_bytes_per_lcore_s, frame_bytes)) {
    io.count_drop(lj, Drop::answer_rate_limited);
    return false;
  }
  return transmit_segment(c, buf, round, seg, rank);
}

bool JobHandler::alloc_payload_mbufs(uint16_t port, bool may_chain, rte_mbuf*& hdr, rte_mbuf*& ext) noexcept {
  const bool chain = may_chain && io.snap->ports[port].zero_copy_tx;
  hdr = rte_pktmbuf_alloc(chain ? io.res.hdr_pool : io.res.copy_pool);
  ext = chain ? rte_pktmbuf_alloc(io.res.ext_pool) : nullptr;
  if (hdr != nullptr && (!chain || ext != nullptr)) return true;
  rte_pktmbuf_free(hdr);
  rte_pktmbuf_free(ext);
  hdr = ext = nullptr;
  io.count_drop(lj, Drop::no_mbuf);
  return false;
}

bool JobHandler::transmit_segment(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank) noexcept {
  Peer& peer = lj.peer(rank);
  rte_mbuf* hdr = nullptr;
  rte_mbuf* ext = nullptr;
  if (!alloc_payload_mbufs(peer.port, true, hdr, ext)) return false;
  if (!fill_result(hdr, ext, c, buf, round, seg, rank, peer)) return false;
  if (!io.queue_tx(lj, peer.port, hdr)) return false;
  bump(lj.counters.results_sent);
  return true;
}

void JobHandler::send_segment_to_all(const Chunk& c, uint32_t seg) noexcept {
  // The common case, every worker on zero-copy ports: one header mbuf per worker from one bulk allocation,
  // all chained to a single payload mbuf that points into the result buffer and counts the chains in its
  // own refcount (a segment shared read-only between packets, as DPDK's multicast example does). Each
  // transmit's free then drops a count; the last one detaches it and returns the buffer reference.
  constexpr uint16_t kBatch = 64;
  rte_mbuf* hdrs[kBatch];
  uint16_t ranks[kBatch];
  for (uint16_t first = 0; first < plan.math.workers; first += kBatch) {
    const uint16_t last = static_cast<uint16_t>(std::min<uint32_t>(plan.math.workers, first + kBatch));
    uint16_t n = 0;
    bool all_chain = true;
    const size_t frame_bytes = result_frame_bytes(plan, c, seg);
    for (uint16_t rank = first; rank < last; ++rank) {
      Peer& peer = lj.peer(rank);
      if (!peer.known || !within_amplification_limit(peer, frame_bytes)) continue;
      all_chain = all_chain && io.snap->ports[peer.port].zero_copy_tx;
      ranks[n++] = rank;
    }
    if (n == 0) continue;
    if (!all_chain || rte_pktmbuf_alloc_bulk(io.res.hdr_pool, hdrs, n) != 0) {
      // (The limit was applied above: the fallback must not spend the credit twice.)
      for (uint16_t i = 0; i < n; ++i) transmit_segment(c, c.cur, c.round, seg, ranks[i]);
      continue;
    }
    rte_mbuf* payload = rte_pktmbuf_alloc(io.res.ext_pool);
    if (payload == nullptr) {
      rte_pktmbuf_free_bulk(hdrs, n);
      io.count_drop(lj, Drop::no_mbuf);
      continue;
    }
    ResultBuf* b = LcoreJob::buf(c, c.cur);
    rte_mbuf_ext_refcnt_update(&b->shinfo, 1);  // the payload mbuf's reference
    proto::Header h = result_header(plan, c, c.cur, c.round, seg, 0, lj.epoch);
    attach_result(payload, b, static_cast<size_t>(h.elem_offset) * dtype_bytes(plan.math.out_dtype), h.payload_bytes);
    rte_mbuf_refcnt_set(payload, n);
    const std::span<const std::byte> bytes(c.out[c.cur] + static_cast<size_t>(h.elem_offset) * dtype_bytes(plan.math.out_dtype),
                                           h.payload_bytes);
    // One header for all ranks (rank and seq change), with one checksum of the shared payload.
    checksum_result(h, bytes);
    std::array<std::byte, proto::kHeaderBytes> wire;
    proto::write_header(h, wire);
    for (uint16_t i = 0; i < n; ++i) {
      Peer& peer = lj.peer(ranks[i]);
      std::byte* p = write_l234(hdrs[i], peer, proto::kHeaderBytes + h.payload_bytes);
      if (p == nullptr) {  // hdrs[i] is freed; drop its count on the payload
        rte_pktmbuf_free(payload);
        continue;
      }
      auto out = std::span<std::byte, proto::kHeaderBytes>(p, proto::kHeaderBytes);
      std::memcpy(out.data(), wire.data(), wire.size());
      proto::write_header_recipient(ranks[i], io.seq++, out);
      if (!seal_for(peer, &peer.current, out, bytes)) {
        rte_pktmbuf_free(hdrs[i]);
        rte_pktmbuf_free(payload);
        continue;
      }
      chain_payload(hdrs[i], payload);
      if (io.queue_tx(lj, peer.port, hdrs[i])) bump(lj.counters.results_sent);
    }
  }
}

namespace {

proto::Header error_header(const JobPlan& plan, uint16_t rank, uint32_t round, uint32_t chunk, uint32_t offset,
                           proto::Status status, uint32_t aux, uint16_t epoch) {
  proto::Header h;
  h.opcode = proto::Opcode::error;
  h.status = status;
  h.dtype = plan.math.in_dtype;
  h.job_id = plan.cfg.id;
  h.rank = rank;
  h.round = round;
  h.chunk_id = chunk;
  h.elem_offset = offset;
  h.aux = aux;
  h.epoch = epoch;
  return h;
}

}  // namespace

void JobHandler::sign_for(const Peer& peer, std::span<std::byte, proto::kHeaderBytes> wire) const noexcept {
  proto::sign_header(peer.previous_key && plan.previous_until_tsc != 0 ? plan.previous_key : plan.key, wire);
}

bool JobHandler::reply(const RxFrame& rx, proto::Header h) noexcept {
  Peer to;
  to.previous_key = rx.previous_key;
  to.mac = rx.l2.src;
  to.ip = rx.ip.src;
  to.udp_port = rx.udp.src_port;
  to.port = static_cast<uint8_t>(rx.port);
  to.known = true;
  if (plan.cfg.sessions) {
    // Sealed under the session the packet opened under, and sent to that session's address whatever the
    // packet's source: a packet that opened under no session gets no answer.
    if (rx.session == nullptr || !rx.session->valid) {
      io.count_drop(lj, Drop::no_session);
      return false;
    }
    to.mac = rx.session->mac;
    to.ip = rx.session->reply.ipv4;
    to.udp_port = rx.session->reply.udp_port;
    to.port = rx.session->port;
    h.seq = io.seq++;
    rte_mbuf* m = start_message(to, h, rx.session);
    return m != nullptr && io.queue_tx(lj, to.port, m);
  }
  if (rx.credited != nullptr && !within_amplification_limit(*rx.credited, proto::kFrameHeadersBytes + h.payload_bytes)) {
    return false;
  }
  h.seq = io.seq++;
  rte_mbuf* m = start_message(to, h);
  return m != nullptr && io.queue_tx(lj, to.port, m);
}

void JobHandler::send_error(const RxFrame& rx, proto::Status status, uint32_t aux) noexcept {
  // The epoch of the packet answered, not the job's: the two differ only in epoch_mismatch (aux says the job's),
  // and a client then takes the error only if it names the epoch the client is in, so a genuine one recorded
  // in another epoch and replayed later changes nothing (docs/protocol.md, "Epochs").
  if (reply(rx, error_header(plan, rx.hdr.rank, rx.hdr.round, rx.hdr.chunk_id, rx.hdr.elem_offset, status,
                                   aux, rx.hdr.epoch))) {
    bump(lj.counters.errors_sent);
  }
}

bool JobHandler::send_joined(const RxFrame& rx, proto::Header h, const proto::JoinedPayload& p) noexcept {
  // To the join's source, as long as the join (the same 44 payload bytes: no amplification), from the UDP port
  // it was sent to (this lcore's, or the owner's for a redirect).
  Peer to;
  to.mac = rx.l2.src;
  to.ip = rx.ip.src;
  to.udp_port = rx.udp.src_port;
  to.port = static_cast<uint8_t>(rx.port);
  to.known = true;
  h.payload_bytes = proto::kJoinedPayloadBytes;
  h.seq = io.seq++;
  rte_mbuf* m = rte_pktmbuf_alloc(io.res.copy_pool);  // header mbufs have no room for the payload
  if (m == nullptr) {
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  std::byte* w = write_l234(m, to, proto::kHeaderBytes + h.payload_bytes, rx.udp.dst_port);
  if (w == nullptr) return false;
  auto* body = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, proto::kJoinedPayloadBytes));
  if (body == nullptr) {
    rte_pktmbuf_free(m);
    io.count_drop(lj, Drop::no_mbuf);
    return false;
  }
  auto wire = std::span<std::byte, proto::kHeaderBytes>(w, proto::kHeaderBytes);
  auto payload = std::span<std::byte, proto::kJoinedPayloadBytes>(body, proto::kJoinedPayloadBytes);
  proto::write_header(h, wire);
  proto::write_joined_payload(p, payload);
  if (plan.authenticated) {
    proto::seal_handshake(rx.previous_key ? plan.previous_handshake_key : plan.handshake_key, wire, payload);
  }
  return io.queue_tx(lj, to.port, m);
}

void JobHandler::send_error_to(uint16_t rank, const Chunk& c, proto::Status status, uint32_t aux) noexcept {
  Peer& peer = lj.peer(rank);
  if (!peer.known || !within_amplification_limit(peer, proto::kFrameHeadersBytes)) return;
  proto::Header h = error_header(plan, rank, c.round, c.id, 0, status, aux, lj.epoch);
  h.seq = io.seq++;
  rte_mbuf* m = start_message(peer, h, &peer.current);
  if (m != nullptr && io.queue_tx(lj, peer.port, m)) bump(lj.counters.errors_sent);
}

}  // namespace phub::engine
