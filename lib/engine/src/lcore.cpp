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

Lcore::Lcore(LcoreResources r) : r_(std::move(r)), tx_(r_.ports.size()) {
  for (size_t p = 0; p < r_.ports.size(); ++p) tx_[p].bind(r_.ports[p], r_.index);
}

std::string Lcore::describe(const Snapshot& s) const {
  std::string line = "lcore " + std::to_string(r_.lcore_id) + " (index " + std::to_string(r_.index) + "): rx";
  for (uint16_t p : r_.rx_ports) line += " " + s.ports[p].name + "/q" + std::to_string(r_.index);
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
  constexpr uint16_t kBurst = kMaxBurst;
  rte_mbuf* pkts[kBurst];
  Rx rx;
  const uint64_t hz = rte_get_tsc_hz();
  const uint64_t timer_period = hz / 1000;        // 1 ms
  const uint64_t drain_period = hz / 1'000'000 * kTxDrainUs;
  uint64_t next_timer = rte_rdtsc() + timer_period;
  uint64_t last_drain = 0;
  uint32_t idle_polls = 0;

  // Idle sleeps are short (tens of microseconds): without this the kernel's default 50 us timer slack
  // would double them and delay the first packet after a pause.
  if (r_.idle_polls_before_sleep != 0) (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  (void)rte_rcu_qsbr_thread_register(r_.qsbr, r_.index);
  rte_rcu_qsbr_thread_online(r_.qsbr, r_.index);

  uint64_t now = rte_rdtsc();
  const uint64_t started = now;
  while (!r_.stop->load(std::memory_order_relaxed)) {
    // One TSC read per iteration: an iteration starts where the previous one read the clock.
    const uint64_t iteration_start = now;
    now_tsc_ = iteration_start;
    snap_ = r_.snapshot->load(std::memory_order_acquire);
    const Snapshot& s = *snap_;
    uint32_t work = 0;

    for (uint16_t p : r_.rx_ports) {
      const uint16_t n = r_.ports[p]->rx(r_.index, pkts, kBurst);
      work += n;
      counters_.rx_packets += n;
      constexpr uint16_t kPrefetchAhead = 4;
      for (uint16_t i = 0; i < std::min(n, kPrefetchAhead); ++i) rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
      for (uint16_t i = 0; i < n; ++i) {
        if (i + kPrefetchAhead < n) rte_prefetch0(rte_pktmbuf_mtod(pkts[i + kPrefetchAhead], void*));
        counters_.rx_bytes += pkts[i]->pkt_len;
        handle_frame(rx, pkts[i], p, s, false);
      }
      release_consumed();
    }
    for (rte_ring* ring : r_.inbox) {
      const unsigned n = rte_ring_sc_dequeue_burst(ring, reinterpret_cast<void**>(pkts), kBurst, nullptr);
      work += n;
      counters_.redirected_in += n;
      for (unsigned i = 0; i < n; ++i) {
        const uint16_t port = pkts[i]->port < RTE_MAX_ETHPORTS ? s.port_index[pkts[i]->port] : 0xffff;
        handle_frame(rx, pkts[i], port, s, true);
      }
      release_consumed();
    }
    // Like l3fwd: full bursts go out as they fill (TxBuffer::add); the rest on a TSC deadline, or at
    // once when this iteration found nothing to do. Fewer, larger bursts matter on PMDs whose TX is a
    // system call (af_packet).
    now = rte_rdtsc();
    if (work == 0 || now - last_drain >= drain_period) {
      for (auto& t : tx_) t.flush(counters_);
      last_drain = now;
    }
    if (now >= next_timer) {
      scan_stalls(s, now);
      next_timer = now + timer_period;
    }
    ++counters_.loops;
    if (work != 0) {
      ++counters_.busy_loops;
      counters_.busy_tsc += now - iteration_start;
    }
    counters_.total_tsc = now - started;
    rte_rcu_qsbr_quiescent(r_.qsbr, r_.index);

    if (work != 0) {
      idle_polls = 0;
    } else if (r_.idle_polls_before_sleep != 0 && ++idle_polls >= r_.idle_polls_before_sleep) {
      bool pending = false;
      for (const auto& t : tx_) pending = pending || t.pending() != 0;
      if (!pending) {
        rte_rcu_qsbr_thread_offline(r_.qsbr, r_.index);
        rte_delay_us_sleep(r_.idle_sleep_us);
        rte_rcu_qsbr_thread_online(r_.qsbr, r_.index);
        ++counters_.idle_sleeps;
        now = rte_rdtsc();
      }
      idle_polls = 0;
    }
  }

  for (auto& t : tx_) t.discard();
  for (rte_ring* ring : r_.inbox) {
    void* m = nullptr;
    while (rte_ring_sc_dequeue(ring, &m) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  }
  rte_rcu_qsbr_thread_offline(r_.qsbr, r_.index);
  (void)rte_rcu_qsbr_thread_unregister(r_.qsbr, r_.index);
  return 0;
}

void Lcore::scan_stalls(const Snapshot& s, uint64_t now) noexcept {
  constexpr uint32_t kChunksPerTick = 256;
  if (s.round_stall_tsc == 0) return;
  for (size_t j = 0; j < s.jobs.size(); ++j) {
    const JobPlan& plan = *s.jobs[j];
    LcoreJob& lj = *s.lcore_jobs[r_.index][j];
    const uint32_t n = lj.chunk_count();
    for (uint32_t k = 0; k < std::min(n, kChunksPerTick); ++k) {
      lj.stall_cursor = lj.stall_cursor + 1 >= n ? 0 : lj.stall_cursor + 1;
      Chunk& c = lj.chunk(lj.stall_cursor);
      if (c.first_tsc == 0 || now - c.first_tsc < s.round_stall_tsc) continue;
      if (c.stall_reported_tsc != 0 && now - c.stall_reported_tsc < s.round_stall_tsc) continue;
      c.stall_reported_tsc = now;
      ++lj.counters.stalls_reported;
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
