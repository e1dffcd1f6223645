// The lcore main loop: RX bursts, hand-off rings, buffered TX, timers, quiescent state, idle back-off.
#include "lcore.hpp"

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <sys/prctl.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "job_handler.hpp"
#include "rx_frame.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kTxDrainUs = 50;  // longest a result waits in a TX buffer while the lcore is busy

}  // namespace

uint64_t Lcore::object_bytes(size_t ports) noexcept {
  return sizeof(Lcore) + ports * (sizeof(TxBuffer) + sizeof(AnswerBucket));
}

LcoreIo::LcoreIo(LcoreResources r)
    : res(std::move(r)), tx(res.ports.size(), SocketAllocator<TxBuffer>(res.socket)) {
  for (size_t p = 0; p < res.ports.size(); ++p) tx[p].bind(res.ports[p], res.index, &tx_pool_lent);
}

Lcore::Lcore(LcoreResources r)
    : io_(std::move(r)), answers_(io_.res.ports.size(), SocketAllocator<AnswerBucket>(io_.res.socket)) {}

JobHandler Lcore::handler(const Snapshot& s, size_t j) noexcept {
  return JobHandler{io_, *s.jobs[j], *s.lcore_jobs[io_.res.index][j]};
}

std::string Lcore::describe(const Snapshot& s) const {
  std::string line = "lcore " + std::to_string(io_.res.lcore_id) + " (index " + std::to_string(io_.res.index) + "): rx";
  line += " " + config::describe_rx_queues(*s.config, io_.res.rx_queues);
  line += "; tx queue " + std::to_string(io_.res.index) + " on every port; shards:";
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const auto& plan = *s.jobs[j];
    const auto owner = static_cast<uint16_t>(plan.first_owner + io_.res.index);
    line += " " + plan.cfg.name + "=" + std::to_string(plan.layout.owned(owner).size()) + " chunks/" +
            std::to_string(plan.layout.owner_elems(owner)) + " elems (udp " +
            std::to_string(plan.cfg.port_base + io_.res.index) + ")";
  }
  return line;
}

int Lcore::run() noexcept {
  RxFrame rx;
  io_.hz = rte_get_tsc_hz();
  if (realtime_) {
    if (auto set = set_policy_of_this_thread(realtime_); !set) {
      std::fprintf(stderr, "phub: lcore %u stays under SCHED_OTHER: %s\n", io_.res.lcore_id, set.error().c_str());
    }
  }
  // Idle sleeps are short (tens of microseconds): without this the kernel's default 50 us timer slack
  // would double them and delay the first packet after a pause.
  if (io_.res.idle_polls_before_sleep != 0) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  (void)rte_rcu_qsbr_thread_register(io_.res.qsbr, io_.res.index);
  rte_rcu_qsbr_thread_online(io_.res.qsbr, io_.res.index);
  looping_.store(true, std::memory_order_release);

  for (size_t b = 0; b < kGapBoundsUs.size(); ++b) gap_bounds_tsc_[b] = io_.hz / 1'000'000 * kGapBoundsUs[b];
  const uint64_t started = rte_rdtsc();
  io_.now_tsc = started;
  next_timer_ = started + io_.hz / 1000;
  last_quiescent_ = started;
  io_.checkpoint_work_ns = 0;  // what the control thread did for a stopped lcore is not this loop's
  while (!io_.res.stop->load(std::memory_order_relaxed)) {
    // One TSC read per iteration: an iteration starts where the previous one read the clock (io_.now_tsc).
    const uint64_t iteration_start = io_.now_tsc;
    io_.snap = io_.res.snapshot->load(std::memory_order_acquire);
    const Snapshot& s = *io_.snap;
    const uint32_t work = poll_rx(rx, s) + poll_inbox(rx, s);
    io_.now_tsc = rte_rdtsc();
    drain_tx(work);
    tick(s);
    if (io_.capturing != 0) copy_captures(s);
    if (io_.checkpoint_work_ns != 0) account_checkpoint_work();
    bump(io_.counters.loops);
    if (work != 0) {
      bump(io_.counters.busy_loops);
      bump(io_.counters.busy_tsc, io_.now_tsc - iteration_start);
    }
    __atomic_store_n(&io_.counters.total_tsc, io_.now_tsc - started, __ATOMIC_RELAXED);
    quiescent();
    idle(io_.capturing != 0 ? 1 : work);  // a capture's background copies are work: no sleep until it is done
  }

  // A clean stop sends what is queued (up to timeouts.drain_ms), then drops the rest.
  const Snapshot& last = *io_.res.snapshot->load(std::memory_order_acquire);
  const uint64_t drain_until = rte_rdtsc() + io_.hz / 1000 * last.config->timeouts.drain_ms;
  for (bool pending = true; pending && rte_rdtsc() < drain_until;) {
    pending = false;
    for (auto& t : io_.tx) {
      t.flush(io_.counters);
      pending = pending || t.pending() != 0;
    }
  }
  for (auto& t : io_.tx) t.discard();
  for (rte_ring* ring : io_.res.inbox) {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  serve_requests(last);  // nothing is left waiting for an answer
  looping_.store(false, std::memory_order_release);
  rte_rcu_qsbr_thread_offline(io_.res.qsbr, io_.res.index);
  (void)rte_rcu_qsbr_thread_unregister(io_.res.qsbr, io_.res.index);
  return 0;
}

uint32_t Lcore::poll_rx(RxFrame& rx, const Snapshot& s) noexcept {
  constexpr uint16_t kPrefetchAhead = 4;
  uint32_t work = 0;
  for (const config::RxQueue& q : io_.res.rx_queues) {
    const uint16_t p = q.port;
    const uint16_t n = io_.res.ports[p]->rx(q.queue, burst_, kMaxBurst);
    work += n;
    bump(io_.counters.rx_packets, n);
    for (uint16_t i = 0; i < std::min(n, kPrefetchAhead); ++i) rte_prefetch0(rte_pktmbuf_mtod(burst_[i], void*));
    for (uint16_t i = 0; i < n; ++i) {
      if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(burst_[i + kPrefetchAhead], void*));
      bump(io_.counters.rx_bytes, burst_[i]->pkt_len);
      handle_frame(rx, burst_[i], p, s, false);
    }
    io_.release_consumed();
  }
  return work;
}

uint32_t Lcore::poll_inbox(RxFrame& rx, const Snapshot& s) noexcept {
  uint32_t work = 0;
  for (rte_ring* ring : io_.res.inbox) {
    const unsigned n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(burst_), kMaxBurst, nullptr);
    work += n;
    bump(io_.counters.redirected_in, n);
    for (unsigned i = 0; i < n; ++i) give_back_handoff_slot(burst_[i], s);
    for (unsigned i = 0; i < n; ++i) {
      const uint16_t port = burst_[i]->port < RTE_MAX_ETHPORTS ? s.port_index[burst_[i]->port] : 0xffff;
      handle_frame(rx, burst_[i], port, s, true);
    }
    io_.release_consumed();
  }
  return work;
}

void Lcore::drain_tx(uint32_t work) noexcept {
  // Like l3fwd: full bursts go out as they fill (TxBuffer::add); the rest on a TSC deadline, or at once
  // when this iteration found nothing to do. Fewer, larger bursts matter on PMDs whose TX is a system
  // call (af_packet).
  if (work == 0 || io_.now_tsc - last_drain_ >= io_.hz / 1'000'000 * kTxDrainUs) {
    for (auto& t : io_.tx) t.flush(io_.counters);
    last_drain_ = io_.now_tsc;
  }
}

void Lcore::tick(const Snapshot& s) noexcept {
  if (io_.now_tsc < next_timer_) return;
  next_timer_ = io_.now_tsc + io_.hz / 1000;  // 1 ms
  scan_stalls(s, io_.now_tsc);
  serve_requests(s);
}

void Lcore::quiescent() noexcept {
  const uint64_t gap = io_.now_tsc - last_quiescent_;
  set_max(io_.counters.max_gap_tsc, gap);
  size_t b = 0;
  while (b < gap_bounds_tsc_.size() && gap > gap_bounds_tsc_[b]) ++b;  // almost always 0: a short loop
  bump(io_.counters.loop_gaps[b]);
  last_quiescent_ = io_.now_tsc;
  rte_rcu_qsbr_quiescent(io_.res.qsbr, io_.res.index);
}

void Lcore::idle(uint32_t work) noexcept {
  if (work != 0) {
    idle_polls_ = 0;
    return;
  }
  if (io_.res.idle_polls_before_sleep == 0 || ++idle_polls_ < io_.res.idle_polls_before_sleep) return;
  idle_polls_ = 0;
  for (const auto& t : io_.tx) {
    if (t.pending() != 0) return;
  }
  // Offline while asleep: the control thread's grace periods do not wait for a sleeping lcore.
  rte_rcu_qsbr_thread_offline(io_.res.qsbr, io_.res.index);
  rte_delay_us_sleep(io_.res.idle_sleep_us);
  rte_rcu_qsbr_thread_online(io_.res.qsbr, io_.res.index);
  bump(io_.counters.idle_sleeps);
  io_.now_tsc = rte_rdtsc();
  last_quiescent_ = io_.now_tsc;
}

void Lcore::serve_requests(const Snapshot& s) noexcept {
  void* item = nullptr;
  while (rte_ring_sc_dequeue(io_.res.requests, &item) == 0) {
    auto* req = static_cast<Request*>(item);
    const int j = s.job_by_id(req->job_id);
    req->found = j >= 0;
    if (j >= 0) {
      LcoreJob& lj = *s.lcore_jobs[io_.res.index][static_cast<size_t>(j)];
      switch (req->kind) {
        case RequestKind::drain:
          __atomic_store_n(&lj.draining, true, __ATOMIC_RELAXED);
          break;
        case RequestKind::reset:
          handler(s, static_cast<size_t>(j)).start_epoch(static_cast<uint16_t>(lj.epoch + 1), false);
          __atomic_store_n(&lj.draining, false, __ATOMIC_RELAXED);
          bump(lj.counters.resets);
          break;
        case RequestKind::capture:
          handler(s, static_cast<size_t>(j)).arm_capture(*req);
          break;
        case RequestKind::detach:
          if (lj.capture == req->capture) handler(s, static_cast<size_t>(j)).detach_capture();
          break;
      }
    }
    bump(io_.counters.requests);
    // The response ring holds as many entries as the request ring: this cannot fail.
    (void)rte_ring_sp_enqueue(io_.res.responses, req);
  }
}

void Lcore::scan_stalls(const Snapshot& s, uint64_t now) noexcept {
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    if (s.round_stall_tsc == 0 && !hierarchical(s.jobs[j]->math)) continue;
    handler(s, j).on_tick(now, s.round_stall_tsc);
  }
}

}  // namespace phub::engine
