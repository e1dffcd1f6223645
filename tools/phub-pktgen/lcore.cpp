// The generator lcore's loop, its control handshake, and the receive path (results, errors, ARP).
#include "lcore.hpp"

#include "frame_cache.hpp"
#include "recycled_frames.hpp"

#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_prefetch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "phub/drivers/arp_mbuf.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::pktgen {

uint64_t now_ns() noexcept {
  static const double ns_per_tsc = 1e9 / static_cast<double>(rte_get_tsc_hz());
  static const uint64_t t0 = rte_rdtsc();
  return static_cast<uint64_t>(static_cast<double>(rte_rdtsc() - t0) * ns_per_tsc) + 1'000'000;
}

GenLcore::GenLcore(LcoreResources r) : r_(std::move(r)), txq_(r_.port_queues) {
  const auto& jobs = *r_.jobs;
  for (const auto& j : jobs) parts_.push_back(std::make_unique<gen::Partition>(j.wl, r_.owners));
  shinfo_.resize(jobs.size());
  for (auto& s : shinfo_) {
    s.free_cb = [](void*, void*) {};  // the payload areas live as long as the generator
    s.fcb_opaque = nullptr;
    rte_mbuf_ext_refcnt_set(&s, 1);
  }

  const std::string name = "pktgen_in" + std::to_string(r_.index);
  inbox_ = rte_ring_create(name.c_str(), 4096, static_cast<int>(rte_socket_id()), RING_F_SC_DEQ);
}

GenLcore::~GenLcore() {
  // Queued frames first: some hold references to cached or recycled frames, whose pools go next.
  for (auto& q : txq_) {
    for (; q.count > 0; --q.count, q.head = (q.head + 1) & (kTxSlots - 1)) rte_pktmbuf_free(q.pkts[q.head]);
  }
  cache_.clear();
  recycled_.clear();
  if (inbox_ != nullptr) {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(inbox_, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    rte_ring_free(inbox_);
  }
}

size_t GenLcore::cached_frames(size_t j) const noexcept { return j < cache_.size() ? cache_[j]->frames() : 0; }

void GenLcore::build_caches() {
  if (!cache_.empty()) return;
  const auto& jobs = *r_.jobs;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const std::string name = "pktgen_fc" + std::to_string(r_.index) + "_" + std::to_string(j);
    // A session job's frames are sealed anew for every push (a new number each): none are pre-built.
    const uint64_t cache_bytes = jobs[j].sessions != nullptr ? 0 : r_.frame_cache_bytes;
    cache_.push_back(std::make_unique<FrameCache>(jobs[j], *parts_[j], cache_bytes, name,
                                                  static_cast<int>(rte_socket_id())));
    // Only where pushes would copy their payload: chained to a template, a push copies nothing either, and
    // a zero-copy peer reads the few template lines from its cache (measured over zero-copy memif: recycled
    // frames cost the server 5-10 % more cycles per push than chained templates).
    recycled_.push_back(std::make_unique<RecycledFrames>(jobs[j], copies_payload(j) ? r_.recycle_depth : 0,
                                                         "pktgen_rf" + std::to_string(r_.index) + "_" + std::to_string(j),
                                                         static_cast<int>(rte_socket_id())));
  }
}

void GenLcore::connect(std::vector<GenLcore*> peers, std::vector<uint16_t> owner_lcore) {
  peers_ = std::move(peers);
  owner_lcore_ = std::move(owner_lcore);
}

void GenLcore::post(Cmd c, const RunSettings& s, double rate_share_pps, bool inject) {
  cmd_ = c;
  if (c == Cmd::start) {  // drain and finish act on the running step: its mode and rate stay
    settings_ = s;
    rate_share_pps_ = rate_share_pps;
    inject_ = inject;
  }
  const uint32_t seq = cmd_seq_.load() + 1;
  cmd_seq_.store(seq, std::memory_order_release);
  while (ack_seq_.load(std::memory_order_acquire) != seq) std::this_thread::sleep_for(std::chrono::microseconds(100));
}

void GenLcore::execute(Cmd c, uint64_t now) noexcept {
  switch (c) {
    case Cmd::start: {
      gen::Knobs k;
      k.mode = settings_.mode;
      k.window = settings_.window;
      k.rto_ns = static_cast<uint64_t>(settings_.rto_ms * 1e6);
      k.loss = settings_.loss;
      k.dup = settings_.dup;
      k.reorder = settings_.reorder;
      k.max_rounds = settings_.rounds;
      k.seed = settings_.seed + r_.index * 7919;
      for (auto& p : parts_) p->start(k, now);
      active_ = true;
      tokens_ = 0;
      tokens_ns_ = now;
      faults_left_ = inject_ ? settings_.inject : decltype(faults_left_){};
      fault_job_ = 0;
      for (size_t j = 0; j < r_.jobs->size(); ++j) {
        if ((*r_.jobs)[j].wl.spec().id == settings_.inject_job) fault_job_ = j;
      }
      break;
    }
    case Cmd::drain:
      for (auto& p : parts_) p->drain();
      break;
    case Cmd::finish:
      for (auto& p : parts_) p->finish(now);
      break;
    default:
      break;
  }
  bool all_settled = true;
  for (const auto& p : parts_) all_settled = all_settled && p->settled();
  settled_.store(all_settled, std::memory_order_release);
  rounds_done_.store(false, std::memory_order_release);
}

namespace {

// Results arrive written by another CPU: the header lines of a few packets ahead, and every line of the next
// one (a result is compared in full), are requested before they are needed, so their misses overlap.
constexpr uint16_t kPrefetchAhead = 4;

void prefetch_frame(const rte_mbuf* m) noexcept {
  const auto* p = rte_pktmbuf_mtod(m, const char*);
  for (uint32_t off = RTE_CACHE_LINE_SIZE; off < m->data_len; off += RTE_CACHE_LINE_SIZE) rte_prefetch0(p + off);
}

}  // namespace

int GenLcore::run() noexcept {
  if (r_.realtime) {
    if (auto set = set_policy_of_this_thread(r_.realtime); !set) {
      std::fprintf(stderr, "pktgen: lcore %u stays under SCHED_OTHER: %s\n", r_.lcore_id, set.error().c_str());
    }
  }
  constexpr uint16_t kBurst = 32;
  rte_mbuf* pkts[kBurst];
  uint32_t idle = 0;
  uint32_t seen = 0;
  for (;;) {
    const uint32_t seq = cmd_seq_.load(std::memory_order_acquire);
    const uint64_t now = now_ns();  // once per iteration: the TSC is slow to read in some VMs
    if (seq != seen) {
      seen = seq;
      if (cmd_ == Cmd::exit) {
        ack_seq_.store(seq, std::memory_order_release);
        break;
      }
      execute(cmd_, now);
      ack_seq_.store(seq, std::memory_order_release);
    }
    uint32_t work = 0;
    for (uint16_t q : r_.queues) {
      const uint16_t n = r_.port->rx(q, pkts, kBurst);
      work += n;
      for (uint16_t i = 0; i < std::min(n, kPrefetchAhead); ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
      if (n != 0) prefetch_frame(pkts[0]);
      for (uint16_t i = 0; i < n; ++i) {
        if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kPrefetchAhead], void*));
        if (i + 1 < n) prefetch_frame(pkts[i + 1]);
        c_.rx_packets.add();
        c_.rx_bytes.add(pkts[i]->pkt_len);
        rx(pkts[i], now);
      }
    }
    const unsigned handed = rte_ring_sc_dequeue_burst(inbox_, reinterpret_cast<void**>(pkts), kBurst, nullptr);
    for (unsigned i = 0; i < handed; ++i) rx(pkts[i], now);
    work += handed;
    if (active_) work += generate(now);
    flush(now);
    bool all_settled = true, all_done = true;
    for (const auto& p : parts_) {
      all_settled = all_settled && p->settled();
      all_done = all_done && (p->rounds_done() || p->slots().size() == 0);
    }
    settled_.store(all_settled, std::memory_order_release);
    rounds_done_.store(all_done, std::memory_order_release);
    if (all_settled && pending() == 0) active_ = false;
    c_.loops.add();
    if (work != 0) {
      idle = 0;
      continue;
    }
    c_.idle_loops.add();
    if (!active_ || (r_.idle_sleep_us != 0 && ++idle > 64)) {
      rte_delay_us_sleep(active_ ? r_.idle_sleep_us : 100);
      idle = 0;
    }
  }
  return 0;
}

void GenLcore::handle_arp(rte_mbuf* m) noexcept {
  const auto arp = drivers::arp_of(m);
  if (!arp || arp->op != proto::ArpOp::request) return;
  for (const auto& j : *r_.jobs) {
    if (!j.addrs.is_rank_ip(arp->target_ip, j.wl.spec().workers)) continue;
    rte_mbuf* r = drivers::alloc_arp_reply(r_.full_pool, *arp, j.addrs.src_mac, arp->target_ip);
    if (r == nullptr) return c_.no_mbuf.add();
    c_.arp_replies.add();
    enqueue(r_.index, r);  // its own TX queue
    return;
  }
}

bool GenLcore::open_answer(const JobRuntime& job, uint16_t owner, const proto::PhubFrame& f,
                           std::span<const std::byte> frame) noexcept {
  if (owner >= job.wl.spec().server_lcores || f.hdr.rank >= job.wl.spec().workers) {
    c_.rx_bad_tag.add();
    return false;
  }
  WorkerSession& s = job.sessions->at(f.hdr.rank, owner);
  const auto msg = frame.subspan(f.udp.payload_offset, proto::kHeaderBytes + f.payload.size());
  const auto v = proto::open_session_packet(proto::server_to_worker(s.keys), s.window, msg, s.reply,
                                            s.payload_mac && proto::session_opcode_has_mac(f.hdr.opcode));
  if (v == proto::SessionVerdict::ok) return true;
  (v == proto::SessionVerdict::replayed ? c_.rx_replayed : c_.rx_bad_tag).add();
  return false;
}

void GenLcore::rx(rte_mbuf* m, uint64_t now) noexcept {
  if (m->nb_segs > 1 && rte_pktmbuf_linearize(m) != 0) {
    c_.rx_malformed.add();
    rte_pktmbuf_free(m);
    return;
  }
  const auto frame = std::span<const std::byte>(rte_pktmbuf_mtod(m, const std::byte*), m->data_len);
  auto f = proto::parse_phub_frame(frame);
  if (!f) {
    if (frame.size() >= proto::kEthBytes && frame[12] == std::byte{0x08} && frame[13] == std::byte{0x06}) {
      handle_arp(m);
    } else {
      c_.rx_malformed.add();
    }
    rte_pktmbuf_free(m);
    return;
  }
  const auto& jobs = *r_.jobs;
  size_t j = 0;
  while (j < jobs.size() && jobs[j].wl.spec().id != f->hdr.job_id) ++j;
  if (j == jobs.size()) {
    c_.rx_unknown_job.add();
    rte_pktmbuf_free(m);
    return;
  }
  const JobRuntime& job = jobs[j];
  if (f->hdr.opcode == proto::Opcode::push || f->hdr.opcode == proto::Opcode::init) {
    c_.rx_echo.add();
    c_.rx_echo_bytes.add(f->payload.size());
    rte_pktmbuf_free(m);
    return;
  }
  const uint16_t owner = static_cast<uint16_t>(f->udp.src_port - job.wl.spec().port_base);
  if (owner < owner_lcore_.size() && owner_lcore_[owner] != r_.index) {
    if (rte_ring_mp_enqueue(peers_[owner_lcore_[owner]]->inbox_, m) != 0) {
      c_.rx_other.add();
      rte_pktmbuf_free(m);
    } else {
      c_.handed_off.add();
    }
    return;
  }
  if (job.sessions != nullptr ? !open_answer(job, owner, *f, frame)
                               : job.wl.signs_with_job_key() &&
                                     !proto::verify_header(job.wl.key(),
                                                           frame.subspan(f->udp.payload_offset).first<proto::kHeaderBytes>())) {
    if (job.sessions == nullptr) c_.rx_bad_tag.add();
    rte_pktmbuf_free(m);
    return;
  }
  gen::Partition& part = *parts_[j];
  const int64_t slot = part.slots().find(f->hdr.chunk_id, f->hdr.elem_offset);
  if (f->hdr.opcode == proto::Opcode::result) {
    (void)part.on_result(f->hdr.rank, slot < 0 ? UINT32_MAX : static_cast<uint32_t>(slot), f->hdr.round, f->payload,
                         now);
  } else if (f->hdr.opcode == proto::Opcode::error) {
    part.on_error(f->hdr.rank, slot, f->hdr.round, f->hdr.status, now);
  } else {
    c_.rx_other.add();
  }
  rte_pktmbuf_free(m);
}

}  // namespace phub::pktgen
