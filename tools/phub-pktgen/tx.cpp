// The generator lcore's transmit path: pushes as a header mbuf chained to the payload template (zero
// copy) or copied whole, open-loop pacing, injected faults, buffered bursts per queue.
#include <rte_malloc.h>

#include <algorithm>
#include <cstring>

#include "frame_cache.hpp"
#include "lcore.hpp"
#include "phub/proto/session_packet.hpp"
#include "recycled_frames.hpp"

namespace phub::pktgen {
namespace {

constexpr size_t kHighWater = 64;  // stop generating while this many packets wait for the queues: frames
                                   // built far ahead are cold in the cache when the PMD copies them
constexpr uint64_t kFaultEvery = 8;  // one injected fault per this many pushes

}  // namespace

size_t GenLcore::pending() const noexcept {
  size_t n = 0;
  for (const auto& q : txq_) n += q.count;
  return n;
}

void GenLcore::enqueue(uint16_t queue, rte_mbuf* m) noexcept { enqueue_run(queue, &m, 1); }

void GenLcore::enqueue_run(uint16_t queue, rte_mbuf* const* ms, size_t n) noexcept {
  // The count stays in a register across the run (one load, one store), not in memory per packet.
  TxQueue& q = txq_[queue];
  rte_mbuf** pkts = q.pkts.data();
  size_t count = q.count;
  const size_t head = q.head;
  size_t i = 0;
  for (; i < n && count < kTxSlots; ++i, ++count) pkts[(head + count) & (kTxSlots - 1)] = ms[i];
  q.count = count;
  if (i < n) {
    c_.tx_full.add(n - i);
    rte_pktmbuf_free_bulk(const_cast<rte_mbuf**>(ms + i), static_cast<unsigned>(n - i));
  }
}

void GenLcore::flush(uint64_t now) noexcept {
  constexpr size_t kBurst = 32;  // as testpmd
  constexpr uint64_t kFullBackoffNs = 2000;  // a full queue is not asked again at once: on some PMDs
                                             // (memif) every attempt costs the receiver too
  for (uint16_t qi = 0; qi < txq_.size(); ++qi) {
    TxQueue& q = txq_[qi];
    if (now < q.retry_ns) continue;
    while (q.count > 0) {
      const size_t n = std::min({q.count, kTxSlots - q.head, kBurst});
      uint32_t len[kBurst];  // read before the PMD may free (and another lcore reuse) the mbufs
      for (size_t i = 0; i < n; ++i) len[i] = q.pkts[q.head + i]->pkt_len;
      const uint16_t sent = r_.port->tx(qi, &q.pkts[q.head], static_cast<uint16_t>(n));
      uint64_t bytes = 0;
      for (uint16_t i = 0; i < sent; ++i) bytes += len[i];
      c_.tx_packets.add(sent);
      c_.tx_bytes.add(bytes);
      q.head = (q.head + sent) & (kTxSlots - 1);
      q.count -= sent;
      if (sent < n) {
        q.retry_ns = now + kFullBackoffNs;
        break;
      }
    }
  }
}

rte_mbuf* GenLcore::reuse_frame(size_t job, const gen::PushOrder& o) noexcept {
  if (rte_mbuf* cached = job < cache_.size() ? cache_[job]->get(o) : nullptr; cached != nullptr) return cached;
  if (job >= recycled_.size()) return nullptr;
  const gen::Slot& slot = parts_[job]->slots()[o.slot];
  if (!recycled_[job]->fits(slot, o)) return nullptr;
  rte_mbuf* m = recycled_[job]->take(slot, o, seq_);
  if (m == nullptr) {
    c_.recycle_busy.add();
    return nullptr;
  }
  ++seq_;
  c_.recycled.add();
  return m;
}

rte_mbuf* GenLcore::build_push(size_t job, const gen::PushOrder& o, rte_mbuf* fresh) noexcept {
  const JobRuntime& j = (*r_.jobs)[job];
  const gen::Slot& slot = parts_[job]->slots()[o.slot];
  const auto payload = gen::push_payload(j.wl, slot, o);
  const auto tail = gen::push_tail(j.wl, o);
  const bool zero_copy = !copies_payload(job);
  rte_mbuf* m = fresh != nullptr ? fresh : rte_pktmbuf_alloc(zero_copy ? r_.hdr_pool : r_.full_pool);
  if (m == nullptr) {
    c_.no_mbuf.add();
    return nullptr;
  }
  auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(
      m, static_cast<uint16_t>(proto::kFrameHeadersBytes + (zero_copy ? 0 : payload.size() + tail.size()))));
  if (p == nullptr) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return nullptr;
  }
  gen::write_push_headers(j.wl, j.addrs, slot, o, seq_++, std::span<std::byte, proto::kFrameHeadersBytes>(p, proto::kFrameHeadersBytes));
  if (!zero_copy) {
    std::memcpy(p + proto::kFrameHeadersBytes, payload.data(), payload.size());
    if (!tail.empty()) std::memcpy(p + proto::kFrameHeadersBytes + payload.size(), tail.data(), tail.size());
    return m;
  }
  rte_mbuf* ext = rte_pktmbuf_alloc(r_.ext_pool);
  if (ext == nullptr) {
    rte_pktmbuf_free(m);
    c_.no_mbuf.add();
    return nullptr;
  }
  // The payload's place in the DPDK-memory copy of the template block it came from.
  const bool init = o.init;
  const std::byte* block = init ? j.wl.init_block().data() : j.wl.push_block().data();
  const size_t off = static_cast<size_t>(payload.data() - block);
  auto* data = const_cast<std::byte*>((init ? j.init_area : j.push_area) + off);
  const rte_iova_t iova = j.iova_contiguous ? (init ? j.init_iova : j.push_iova) + off : rte_malloc_virt2iova(data);
  rte_mbuf_ext_refcnt_update(&shinfo_[job], 1);
  rte_pktmbuf_attach_extbuf(ext, data, iova, static_cast<uint16_t>(payload.size()), &shinfo_[job]);
  ext->data_len = static_cast<uint16_t>(payload.size());
  ext->pkt_len = payload.size();
  m->next = ext;
  m->nb_segs = 2;
  m->pkt_len += payload.size();
  return m;
}

void GenLcore::seal_push(size_t job, const gen::PushOrder& o, rte_mbuf* m) noexcept {
  // The header sits in the first segment; the payload (and tail) after it there, or chained (zero copy).
  auto* base = rte_pktmbuf_mtod(m, std::byte*);
  const auto wire = std::span<std::byte, proto::kHeaderBytes>(base + proto::kFrameHeadersBytes - proto::kHeaderBytes,
                                                               proto::kHeaderBytes);
  const std::span<const std::byte> payload =
      m->next != nullptr ? std::span<const std::byte>(rte_pktmbuf_mtod(m->next, const std::byte*), m->next->data_len)
                         : std::span<const std::byte>(base + proto::kFrameHeadersBytes, m->data_len - proto::kFrameHeadersBytes);
  const JobRuntime& j = (*r_.jobs)[job];
  WorkerSession& s = j.sessions->at(o.rank, parts_[job]->slots()[o.slot].owner);
  proto::seal_session_header(proto::worker_to_server(s.keys), wire, payload, s.reply, s.next_seq++, s.payload_mac);
}

bool GenLcore::copies_payload(size_t job) const noexcept {
  // (A push with a tail is copied: the tail follows the payload in one segment.)
  const JobRuntime& j = (*r_.jobs)[job];
  return !r_.zero_copy || j.push_area == nullptr || !j.wl.push_tail().empty();
}

uint32_t GenLcore::send_orders(size_t job, std::span<const gen::PushOrder> orders) noexcept {
  // Frames built whole (payload copied, no frames to reuse) take their mbufs from the pool in one go.
  rte_mbuf* fresh[kMaxOrders];
  size_t nfresh = 0, used = 0;
  const bool reuses = (job < cache_.size() && cache_[job]->ok()) || (job < recycled_.size() && recycled_[job]->ok());
  if (!reuses && copies_payload(job) && orders.size() <= kMaxOrders &&
      rte_pktmbuf_alloc_bulk(r_.full_pool, fresh, static_cast<unsigned>(orders.size())) == 0) {
    nfresh = orders.size();
  }
  // Queued in runs of pushes bound for the same queue (with one server lcore: all of them).
  rte_mbuf* run[kMaxOrders];
  size_t run_len = 0;
  uint16_t run_queue = 0;
  uint32_t sent = 0;
  const gen::SlotMap& slots = parts_[job]->slots();
  const bool sealed = (*r_.jobs)[job].sessions != nullptr;
  for (const auto& o : orders) {
    if (o.drop) continue;
    rte_mbuf* m = reuse_frame(job, o);
    if (m == nullptr) m = build_push(job, o, used < nfresh ? fresh[used++] : nullptr);
    if (m == nullptr) continue;
    if (sealed) seal_push(job, o, m);
    const uint16_t queue = queue_of(slots[o.slot].owner);
    if (run_len == kMaxOrders || (run_len != 0 && queue != run_queue)) {
      enqueue_run(run_queue, run, run_len);
      run_len = 0;
    }
    run_queue = queue;
    run[run_len++] = m;
    ++sent;
  }
  if (run_len != 0) enqueue_run(run_queue, run, run_len);
  if (used < nfresh) rte_pktmbuf_free_bulk(fresh + used, static_cast<unsigned>(nfresh - used));
  pushes_since_fault_ += orders.size();
  return sent;
}

uint32_t GenLcore::inject_faults(uint64_t now) noexcept {
  (void)now;
  gen::Partition& part = *parts_[fault_job_];
  if (part.slots().size() == 0 || pushes_since_fault_ < kFaultEvery) return 0;
  for (size_t f = 0; f < faults_left_.size(); ++f) {
    if (faults_left_[f] == 0) continue;
    const JobRuntime& j = (*r_.jobs)[fault_job_];
    const uint32_t slot = static_cast<uint32_t>(c_.faults[f].get() % part.slots().size());
    // Labelled with the newest round pushed, so that a fault made from a valid push (future_round adds
    // two) can never pass for a worker's contribution.
    const gen::PushOrder o{static_cast<uint16_t>(c_.faults[f].get() % j.wl.spec().workers), slot, part.max_pushed(),
                           false, false, false};
    rte_mbuf* m = rte_pktmbuf_alloc(r_.full_pool);
    if (m == nullptr) return 0;
    auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_mtod(m, std::byte*));
    const auto room = std::span<std::byte>(p, rte_pktmbuf_tailroom(m));
    const size_t good = gen::write_push_frame(j.wl, j.addrs, part.slots()[slot], o, seq_++, room);
    const gen::FaultJob fj{j.wl.spec().workers, j.wl.spec().round_modulus, j.wl.authenticated() ? &j.wl.key() : nullptr};
    const size_t len = gen::corrupt(static_cast<gen::Fault>(f), room, good, fj);
    if (good == 0 || rte_pktmbuf_append(m, static_cast<uint16_t>(len)) == nullptr) {
      rte_pktmbuf_free(m);
      return 0;
    }
    enqueue(queue_of(part.slots()[slot].owner), m);
    --faults_left_[f];
    c_.faults[f].add();
    pushes_since_fault_ = 0;
    return 1;
  }
  return 0;
}

uint32_t GenLcore::generate(uint64_t now) noexcept {
  if (pending() >= kHighWater) return 0;
  constexpr size_t kOrders = kMaxOrders;
  gen::PushOrder orders[kOrders];
  uint32_t made = 0;
  for (size_t j = 0; j < parts_.size(); ++j) {
    const size_t n = parts_[j]->poll(now, orders);
    made += send_orders(j, std::span(orders, n));
  }
  if (settings_.mode == gen::LoopMode::open && !parts_.empty()) {
    size_t budget = kOrders;
    if (rate_share_pps_ > 0) {
      tokens_ = std::min(tokens_ + static_cast<double>(now - tokens_ns_) * 1e-9 * rate_share_pps_, 64.0);
      budget = std::min(budget, static_cast<size_t>(tokens_));
    }
    tokens_ns_ = now;
    for (size_t tries = 0; tries < parts_.size() && budget > 0; ++tries) {
      const size_t j = open_rr_++ % parts_.size();
      const size_t n = parts_[j]->open_pushes(now, std::span(orders, budget));
      made += send_orders(j, std::span(orders, n));
      tokens_ -= static_cast<double>(n);
      budget -= n;
    }
  }
  return made + inject_faults(now);
}

}  // namespace phub::pktgen
