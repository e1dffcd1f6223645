// The lcore main loop: RX bursts, hand-off rings, buffered TX, timers, quiescent state, idle back-off.
#include "phub/engine/lcore.hpp"

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "rx_frame.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kTxDrainUs = 50;  // longest a result waits in a TX buffer while the lcore is busy

}  // namespace

uint64_t Lcore::object_bytes(size_t ports) noexcept {
  return sizeof(Lcore) + ports * (sizeof(TxBuffer) + sizeof(AnswerBucket));
}

Lcore::Lcore(LcoreResources r)
    : r_(std::move(r)),
      tx_(r_.ports.size(), SocketAllocator<TxBuffer>(r_.socket)),
      answers_(r_.ports.size(), SocketAllocator<AnswerBucket>(r_.socket)) {
  for (size_t p = 0; p < r_.ports.size(); ++p) tx_[p].bind(r_.ports[p], r_.index, &tx_pool_lent_);
}

std::string Lcore::describe(const Snapshot& s) const {
  std::string line = "lcore " + std::to_string(r_.lcore_id) + " (index " + std::to_string(r_.index) + "): rx";
  line += " " + config::describe_rx_queues(*s.config, r_.rx_queues);
  line += "; tx queue " + std::to_string(r_.index) + " on every port; shards:";
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const auto& plan = *s.jobs[j];
    const auto owner = static_cast<uint16_t>(plan.first_owner + r_.index);
    line += " " + plan.cfg.name + "=" + std::to_string(plan.layout.owned(owner).size()) + " chunks/" +
            std::to_string(plan.layout.owner_elems(owner)) + " elems (udp " +
            std::to_string(plan.cfg.port_base + r_.index) + ")";
  }
  return line;
}

int Lcore::run() noexcept {
  Rx rx;
  hz_ = rte_get_tsc_hz();
  if (realtime_) {
    if (auto set = set_policy_of_this_thread(realtime_); !set) {
      std::fprintf(stderr, "phub: lcore %u stays under SCHED_OTHER: %s\n", r_.lcore_id, set.error().c_str());
    }
  }
  // Idle sleeps are short (tens of microseconds): without this the kernel's default 50 us timer slack
  // would double them and delay the first packet after a pause.
  if (r_.idle_polls_before_sleep != 0) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  (void)rte_rcu_qsbr_thread_register(r_.qsbr, r_.index);
  rte_rcu_qsbr_thread_online(r_.qsbr, r_.index);
  looping_.store(true, std::memory_order_release);

  for (size_t b = 0; b < kGapBoundsUs.size(); ++b) gap_bounds_tsc_[b] = hz_ / 1'000'000 * kGapBoundsUs[b];
  const uint64_t started = rte_rdtsc();
  now_tsc_ = started;
  next_timer_ = started + hz_ / 1000;
  last_quiescent_ = started;
  checkpoint_work_ns_ = 0;  // what the control thread did for a stopped lcore is not this loop's
  while (!r_.stop->load(std::memory_order_relaxed)) {
    // One TSC read per iteration: an iteration starts where the previous one read the clock (now_tsc_).
    const uint64_t iteration_start = now_tsc_;
    snap_ = r_.snapshot->load(std::memory_order_acquire);
    const Snapshot& s = *snap_;
    const uint32_t work = poll_rx(rx, s) + poll_inbox(rx, s);
    now_tsc_ = rte_rdtsc();
    drain_tx(work);
    tick(s);
    if (capturing_ != 0) copy_captures(s);
    if (checkpoint_work_ns_ != 0) account_checkpoint_work();
    bump(counters_.loops);
    if (work != 0) {
      bump(counters_.busy_loops);
      bump(counters_.busy_tsc, now_tsc_ - iteration_start);
    }
    __atomic_store_n(&counters_.total_tsc, now_tsc_ - started, __ATOMIC_RELAXED);
    quiescent();
    idle(capturing_ != 0 ? 1 : work);  // a capture's background copies are work: no sleep until it is done
  }

  // A clean stop sends what is queued (up to timeouts.drain_ms), then drops the rest.
  const Snapshot& last = *r_.snapshot->load(std::memory_order_acquire);
  const uint64_t drain_until = rte_rdtsc() + hz_ / 1000 * last.config->timeouts.drain_ms;
  for (bool pending = true; pending && rte_rdtsc() < drain_until;) {
    pending = false;
    for (auto& t : tx_) {
      t.flush(counters_);
      pending = pending || t.pending() != 0;
    }
  }
  for (auto& t : tx_) t.discard();
  for (rte_ring* ring : r_.inbox) {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  serve_requests(last);  // nothing is left waiting for an answer
  looping_.store(false, std::memory_order_release);
  rte_rcu_qsbr_thread_offline(r_.qsbr, r_.index);
  (void)rte_rcu_qsbr_thread_unregister(r_.qsbr, r_.index);
  return 0;
}

uint32_t Lcore::poll_rx(Rx& rx, const Snapshot& s) noexcept {
  constexpr uint16_t kPrefetchAhead = 4;
  uint32_t work = 0;
  for (const config::RxQueue& q : r_.rx_queues) {
    const uint16_t p = q.port;
    const uint16_t n = r_.ports[p]->rx(q.queue, burst_, kMaxBurst);
    work += n;
    bump(counters_.rx_packets, n);
    for (uint16_t i = 0; i < std::min(n, kPrefetchAhead); ++i) rte_prefetch0(rte_pktmbuf_mtod(burst_[i], void*));
    for (uint16_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(burst_[i + kPrefetchAhead], void*));
      bump(counters_.rx_bytes, burst_[i]->pkt_len);
      handle_frame(rx, burst_[i], p, s, false);
    }
    release_consumed();
  }
  return work;
}

uint32_t Lcore::poll_inbox(Rx& rx, const Snapshot& s) noexcept {
  uint32_t work = 0;
  for (rte_ring* ring : r_.inbox) {
    const unsigned n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(burst_), kMaxBurst, nullptr);
    work += n;
    bump(counters_.redirected_in, n);
    for (unsigned i = 0; i < n; ++i) give_back_handoff_slot(burst_[i], s);
    for (unsigned i = 0; i < n; ++i) {
      const uint16_t port = burst_[i]->port < RTE_MAX_ETHPORTS ? s.port_index[burst_[i]->port] : 0xffff;
      handle_frame(rx, burst_[i], port, s, true);
    }
    release_consumed();
  }
  return work;
}

void Lcore::drain_tx(uint32_t work) noexcept {
  // Like l3fwd: full bursts go out as they fill (TxBuffer::add); the rest on a TSC deadline, or at once
  // when this iteration found nothing to do. Fewer, larger bursts matter on PMDs whose TX is a system
  // call (af_packet).
  if (work == 0 || now_tsc_ - last_drain_ >= hz_ / 1'000'000 * kTxDrainUs) {
    for (auto& t : tx_) t.flush(counters_);
    last_drain_ = now_tsc_;
  }
}

void Lcore::tick(const Snapshot& s) noexcept {
  if (now_tsc_ < next_timer_) return;
  next_timer_ = now_tsc_ + hz_ / 1000;  // 1 ms
  scan_stalls(s, now_tsc_);
  serve_requests(s);
}

void Lcore::quiescent() noexcept {
  const uint64_t gap = now_tsc_ - last_quiescent_;
  set_max(counters_.max_gap_tsc, gap);
  size_t b = 0;
  while (b < gap_bounds_tsc_.size() && gap > gap_bounds_tsc_[b]) ++b;  // almost always 0: a short loop
  bump(counters_.loop_gaps[b]);
  last_quiescent_ = now_tsc_;
  rte_rcu_qsbr_quiescent(r_.qsbr, r_.index);
}

void Lcore::idle(uint32_t work) noexcept {
  if (work != 0) {
    idle_polls_ = 0;
    return;
  }
  if (r_.idle_polls_before_sleep == 0 || ++idle_polls_ < r_.idle_polls_before_sleep) return;
  idle_polls_ = 0;
  for (const auto& t : tx_) {
    if (t.pending() != 0) return;
  }
  // Offline while asleep: the control thread's grace periods do not wait for a sleeping lcore.
  rte_rcu_qsbr_thread_offline(r_.qsbr, r_.index);
  rte_delay_us_sleep(r_.idle_sleep_us);
  rte_rcu_qsbr_thread_online(r_.qsbr, r_.index);
  bump(counters_.idle_sleeps);
  now_tsc_ = rte_rdtsc();
  last_quiescent_ = now_tsc_;
}

void Lcore::serve_requests(const Snapshot& s) noexcept {
  void* item = nullptr;
  while (rte_ring_sc_dequeue(r_.requests, &item) == 0) {
    auto* req = static_cast<Request*>(item);
    const int j = s.job_by_id(req->job_id);
    req->found = j >= 0;
    if (j >= 0) {
      LcoreJob& lj = *s.lcore_jobs[r_.index][static_cast<size_t>(j)];
      switch (req->kind) {
        case RequestKind::drain:
          __atomic_store_n(&lj.draining, true, __ATOMIC_RELAXED);
          break;
        case RequestKind::reset:
          start_epoch(*s.jobs[static_cast<size_t>(j)], lj, static_cast<uint16_t>(lj.epoch + 1), false);
          __atomic_store_n(&lj.draining, false, __ATOMIC_RELAXED);
          bump(lj.counters.resets);
          break;
        case RequestKind::capture:
          arm_capture(*s.jobs[static_cast<size_t>(j)], lj, *req);
          break;
        case RequestKind::detach:
          if (lj.capture == req->capture) detach_capture(lj);
          break;
      }
    }
    bump(counters_.requests);
    // The response ring holds as many entries as the request ring: this cannot fail.
    (void)rte_ring_sp_enqueue(r_.responses, req);
  }
}

void Lcore::scan_stalls(const Snapshot& s, uint64_t now) noexcept {
  constexpr uint32_t kChunksPerTick = 256;
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const JobPlan& plan = *s.jobs[j];
    const bool forwards = hierarchical(plan.math);
    if (s.round_stall_tsc == 0 && !forwards) continue;
    LcoreJob& lj = *s.lcore_jobs[r_.index][j];
    // Peer hubs' MACs are asked for before the first forward needs them.
    for (uint16_t rack = 0; forwards && rack < plan.math.hub.racks; ++rack) {
      if (rack != plan.math.hub.my_rack) (void)resolve_hub(plan, lj, rack);
    }
    if (forwards) send_hub_states(plan, lj);
    const uint32_t n = lj.chunk_count();
    for (uint32_t k = 0; k < std::min(n, kChunksPerTick); ++k) {
      lj.stall_cursor = lj.stall_cursor + 1 >= n ? 0 : lj.stall_cursor + 1;
      Chunk& c = lj.chunk(lj.stall_cursor);
      if (forwards && c.forward_due_tsc != 0 && now >= c.forward_due_tsc) resend_forwards(plan, lj, c, now);
      if (s.round_stall_tsc == 0) continue;
      if (c.first_tsc == 0 || now - c.first_tsc < s.round_stall_tsc) continue;
      if (c.stall_reported_tsc != 0 && now - c.stall_reported_tsc < s.round_stall_tsc) continue;
      c.stall_reported_tsc = now;
      bump(lj.counters.stalls_reported);
      const uint16_t missing = first_missing_rank(plan.math, c);
      for (uint16_t rank = 0; rank < plan.math.workers; ++rank) {
        bool any = false;
        for (uint32_t seg = 0; seg < c.segments && !any; ++seg) any = contributed(plan.math, c, seg, rank);
        if (any) send_error_to(plan, lj, rank, c, proto::Status::round_stalled, missing);
      }
    }
  }
}

}  // namespace phub::engine
