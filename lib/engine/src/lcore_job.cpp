// The per-lcore part of a job: chunk memory carved from one arena, result buffers, peers, rate limiter.
#include "phub/engine/lcore_job.hpp"

#include <sys/random.h>

#include "phub/engine/hierarchy.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_malloc.h>
#include <rte_memory.h>

#include <algorithm>
#include <ctime>
#include <atomic>
#include <cmath>
#include <new>

namespace phub::engine {
namespace {

constexpr uint64_t round64(uint64_t n) noexcept { return (n + 63) / 64 * 64; }

// Called by whoever frees the last mbuf of a replaced result buffer: it becomes a spare again.
void return_result_buffer(void* /*addr*/, void* opaque) {
  auto* b = static_cast<ResultBuf*>(opaque);
  if (rte_ring_mp_enqueue(b->home, b) != 0) {
    // Cannot happen: the ring holds every buffer of the job. Keep the buffer out of circulation.
  }
}

// IOVA of a buffer inside DPDK memory (in IOVA-as-VA mode, the address itself).
rte_iova_t iova_of(const void* p) noexcept {
  if (rte_eal_iova_mode() == RTE_IOVA_VA) return reinterpret_cast<uintptr_t>(p);
  return rte_mem_virt2iova(p);
}

// The limits of a rack hub's resend timer towards a peer hub (docs/hierarchy.md, "A rack hub towards the
// home"), in TSC ticks of `hz`. Before any sample 100 ms: longer than a round's forwards over a slow rack
// uplink take in the usual case, so a healthy first round is rarely sent twice, and a loss before the
// first answer costs one such wait. At least 1 ms (a healthy core's round trip is far below), at most 2 s
// (backoff included: a peer that does not answer is still asked every 2 s).
ResendTimer::Limits forward_resend_limits(uint64_t hz) noexcept {
  const uint64_t per_ms = hz / 1000;
  return {.initial = 100 * per_ms, .min = 1 * per_ms, .max = 2000 * per_ms};
}

}  // namespace

Expected<std::unique_ptr<LcoreJob>, std::string> LcoreJob::create(const JobPlan& plan, uint16_t lcore, int socket) {
  static std::atomic<uint32_t> serial{0};
  const std::string who = job_label(plan.cfg) + " on lcore index " + std::to_string(lcore);
  auto fail = [&](const std::string& what, uint64_t bytes) {
    return unexpected(who + ": cannot allocate " + what + " (" + std::to_string(bytes) +
                      " bytes): server memory exhausted");
  };
  std::unique_ptr<LcoreJob> lj;
  try {
    lj.reset(new (socket) LcoreJob());
  } catch (const std::bad_alloc&) {
    return fail("its state", sizeof(LcoreJob));
  }
  lj->workers_ = plan.math.workers;
  const JobMath& m = plan.math;
  const auto owned = plan.layout.owned(static_cast<uint16_t>(plan.first_owner + lcore));
  const auto n = static_cast<uint32_t>(owned.size());

  uint64_t arena_bytes = 0;
  for (uint32_t id : owned) {
    const auto& ci = plan.layout.chunk(id);
    arena_bytes += chunk_sizes(m, ci.elems, ci.segments, homed_here(m, id)).arena_total();
  }
  const uint64_t chunks_bytes = round64(sizeof(Chunk) * std::max<uint32_t>(n, 1));
  const uint64_t peers_bytes = round64(sizeof(Peer) * m.workers);
  const uint32_t spares = spare_results(n);
  const uint32_t objects = 2 * n + spares;
  const uint64_t result_bytes = static_cast<uint64_t>(plan.layout.params().chunk_elems) * dtype_bytes(m.out_dtype);
  const uint64_t obj_bytes = result_object_bytes(result_bytes);

  if (arena_bytes != 0) {
    lj->arena_ = static_cast<std::byte*>(rte_zmalloc_socket("phub_arena", arena_bytes, 64, socket));
    if (lj->arena_ == nullptr) return fail("chunk state", arena_bytes);
  }
  lj->chunks_ = static_cast<Chunk*>(rte_zmalloc_socket("phub_chunks", chunks_bytes, 64, socket));
  if (lj->chunks_ == nullptr) return fail("chunk records", chunks_bytes);
  lj->peers_ = static_cast<Peer*>(rte_zmalloc_socket("phub_peers", peers_bytes, 64, socket));
  if (lj->peers_ == nullptr) return fail("peer table", peers_bytes);
  if (plan.cfg.sessions) lj->session_board = std::make_unique<SessionBoard>(m.workers);
  lj->result_block_ = static_cast<std::byte*>(rte_zmalloc_socket("phub_results", objects * obj_bytes, 64, socket));
  if (lj->result_block_ == nullptr) return fail("result buffers", objects * obj_bytes);
  const std::string ring_name = "phub_rb" + std::to_string(serial.fetch_add(1));
  lj->spares_ = rte_ring_create(ring_name.c_str(), rte_align32pow2(spares + 1), socket, RING_F_SC_DEQ);
  if (lj->spares_ == nullptr) return unexpected(who + ": spare ring: " + rte_strerror(rte_errno));
  lj->result_objects_ = objects;
  lj->result_object_bytes_ = obj_bytes;
  lj->allocated_bytes =
      arena_bytes + chunks_bytes + peers_bytes + objects * obj_bytes + spares_ring_bytes(spares);

  for (uint32_t i = 0; i < objects; ++i) {
    auto* b = new (lj->result_block_ + i * obj_bytes) ResultBuf{};
    b->data = lj->result_block_ + i * obj_bytes + round64(sizeof(ResultBuf));
    b->data_iova = iova_of(b->data);
    b->home = lj->spares_;
    b->shinfo.free_cb = return_result_buffer;
    b->shinfo.fcb_opaque = b;
    // A chunk's buffer holds the chunk's reference; a spare in the ring holds none.
    rte_mbuf_ext_refcnt_set(&b->shinfo, i < 2 * n ? 1 : 0);
    if (i >= 2 * n) (void)rte_ring_mp_enqueue(lj->spares_, b);
  }

  std::byte* arena = lj->arena_;
  for (uint32_t i = 0; i < n; ++i) {
    const auto& ci = plan.layout.chunk(owned[i]);
    Chunk* c = new (&lj->chunks_[i]) Chunk{};
    c->id = owned[i];
    c->elems = ci.elems;
    c->segments = ci.segments;
    c->home = hierarchical(m) ? m.hub.homes->home(owned[i]) : 0;
    arena += carve_chunk(m, *c, arena);
    lj->attach(*c, 0, reinterpret_cast<ResultBuf*>(lj->result_block_ + (2 * i) * obj_bytes));
    lj->attach(*c, 1, reinterpret_cast<ResultBuf*>(lj->result_block_ + (2 * i + 1) * obj_bytes));
  }
  lj->chunk_count_ = n;
  uint32_t most_segments = 0;
  for (uint32_t i = 0; i < n; ++i) most_segments = std::max(most_segments, lj->chunks_[i].segments);
  lj->capture_words = (most_segments + 63) / 64;
  lj->capture_state.assign(n, LcoreJob::capture_idle);
  lj->capture_copied.assign(static_cast<size_t>(n) * lj->capture_words, 0);
  lj->capture_segs_left.assign(n, 0);
  if (plan.hub != nullptr) {
    for (const HubPlan::Hub& h : plan.hub->hubs) {
      Peer p{};
      p.ip = h.ipv4;
      p.udp_port = static_cast<uint16_t>(h.port_base + lcore);
      p.port = static_cast<uint8_t>(h.port);
      p.proven = true;  // a hub's address is configured, not claimed by a packet
      lj->hub_peers_.push_back(p);
    }
    lj->hub_arp_tsc.assign(plan.hub->hubs.size(), 0);
    lj->hub_result_tsc.assign(plan.hub->hubs.size(), 0);
    lj->hub_counters.assign(plan.hub->hubs.size(), HubPeerCounters{});
    lj->hub_resend.assign(plan.hub->hubs.size(), ResendTimer(forward_resend_limits(rte_get_tsc_hz())));
    for (size_t r = 0; r < lj->hub_resend.size(); ++r) lj->hub_counters[r].rto_tsc = lj->hub_resend[r].rto();
    lj->hub_links.assign(plan.hub->hubs.size(), HubLink{});
    lj->hub_hparams.assign(plan.hub->hubs.size(), HubHparams{});
    // The lcore's life for the job: its realtime clock now, so that a later life of this hub (a restart, the
    // job added again) tells its peers so (hub_state's life; docs/protocol.md, "Hub state").
    timespec now{};
    (void)clock_gettime(CLOCK_REALTIME, &now);
    const uint64_t life = std::max<uint64_t>(1, static_cast<uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(now.tv_nsec));
    for (HubLink& link : lj->hub_links) {
      link.my_life = life;
      while (link.my_nonce == 0) {
        if (getrandom(&link.my_nonce, sizeof(link.my_nonce), 0) != static_cast<ssize_t>(sizeof(link.my_nonce))) {
          return unexpected(std::string("getrandom failed for a hub_state nonce"));
        }
      }
    }
  }
  return lj;
}

LcoreJob::~LcoreJob() {
  rte_ring_free(spares_);
  rte_free(result_block_);
  rte_free(peers_);
  rte_free(chunks_);
  rte_free(arena_);
}

void LcoreJob::attach(Chunk& c, int i, ResultBuf* b) noexcept {
  c.out_handle[i] = b;
  c.out[i] = b->data;
}

bool LcoreJob::renew_previous(Chunk& c) noexcept {
  const int prev = c.cur ^ 1;
  ResultBuf* old = buf(c, prev);
  if (!busy(old)) return true;
  void* spare = nullptr;
  if (rte_ring_sc_dequeue(spares_, &spare) != 0) return false;
  auto* fresh = static_cast<ResultBuf*>(spare);
  rte_mbuf_ext_refcnt_set(&fresh->shinfo, 1);
  attach(c, prev, fresh);
  // Drop the chunk's reference; if the transmits finished meanwhile, the buffer is a spare right away.
  if (rte_mbuf_ext_refcnt_update(&old->shinfo, -1) == 0) return_result_buffer(old->data, old);
  return true;
}

void LcoreJob::forget_peers() noexcept {
  for (uint16_t r = 0; r < workers_; ++r) {
    peers_[r].known = false;
    peers_[r].incarnation = 0;
    peers_[r].proven = false;
    peers_[r].unproven_credit_bytes = 0;
  }
}

uint64_t LcoreJob::transmits_in_flight() const noexcept {
  uint64_t refs = 0;
  for (uint32_t i = 0; i < result_objects_; ++i) {
    const auto* b = reinterpret_cast<const ResultBuf*>(result_block_ + i * result_object_bytes_);
    refs += rte_mbuf_ext_refcnt_read(&b->shinfo);
  }
  // Every chunk holds one reference to each of its two buffers. Replies that point at no result buffer
  // (errors, joined) but wait in a transmit buffer count too: the buffer's slot names this LcoreJob.
  return refs - 2ull * chunk_count_ + load(tx_hold.packets);
}

}  // namespace phub::engine
