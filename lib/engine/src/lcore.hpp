// One poll-mode worker lcore: it polls its RX queues and hand-off rings, aggregates the chunks it owns,
// answers ARP/ICMP, sends results, serves the control thread's requests, and reports a quiescent state
// once per loop iteration.
#pragma once

#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <optional>
#include <vector>

#include "phub/drivers/eth_port.hpp"
#include "phub/engine/counters.hpp"
#include "lcore_io.hpp"
#include "phub/engine/requests.hpp"
#include "phub/engine/snapshot.hpp"
#include "phub/engine/socket_memory.hpp"
#include "phub/engine/tx_buffer.hpp"
#include "phub/config/queue_map.hpp"
#include "phub/base/realtime.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/handshake.hpp"

namespace phub::engine {

class JobHandler;
struct RxFrame;

class Lcore : public OnSocket {  // built with new (its socket) Lcore(...)
 public:
  explicit Lcore(LcoreResources r);
  // The DPDK memory an lcore's object takes on its socket with `ports` ports (the memory budget counts it):
  // the object and its per-port transmit buffers and answer buckets.
  [[nodiscard]] static uint64_t object_bytes(size_t ports) noexcept;

  // The main loop; returns when *stop becomes true. It runs under `realtime` when set (Engine::start checked
  // that its polling gives the CPU away there).
  int run() noexcept;
  void set_realtime(const std::optional<RealtimePolicy>& realtime) { realtime_ = realtime; }
  // Whether run() has started its loop (its scheduling policy set): Engine::start waits for it.
  [[nodiscard]] bool looping() const noexcept { return looping_.load(std::memory_order_acquire); }

  // The control thread serves the lcore's requests itself while the lcore does not run (before start(),
  // after stop()).
  void serve_requests_stopped(const Snapshot& s) noexcept {
    io_.snap = &s;
    serve_requests(s);
    for (uint32_t i = 0; io_.capturing != 0 && i < kStoppedCopiesPerCall; ++i) copy_captures(s);
  }

  [[nodiscard]] const LcoreCounters& counters() const noexcept { return io_.counters; }
  [[nodiscard]] const LcoreResources& resources() const noexcept { return io_.res; }
  // One line: lcore id, queues, owned shards per job.
  [[nodiscard]] std::string describe(const Snapshot& s) const;

 private:
  using Rx = RxFrame;  // a parsed frame on its way through the gate and the handlers (rx_frame.hpp)
  using Outcome = LcoreIo::Outcome;
  static constexpr uint16_t kMaxBurst = LcoreIo::kMaxBurst;

  // The steps of one loop iteration (lcore.cpp), in the manner of DPDK's l3fwd.
  uint32_t poll_rx(Rx& rx, const Snapshot& s) noexcept;     // bursts from the lcore's queues
  uint32_t poll_inbox(Rx& rx, const Snapshot& s) noexcept;  // frames other lcores handed over
  void drain_tx(uint32_t work) noexcept;                    // buffered results out, on a TSC deadline
  void tick(const Snapshot& s) noexcept;                    // timers: stalled rounds, control requests
  void quiescent() noexcept;                                // RCU: nothing of older snapshots is held
  void idle(uint32_t work) noexcept;                        // back off after a run of empty polls
  void serve_requests(const Snapshot& s) noexcept;

  // `port`: index of the port the frame arrived on (0xffff: unknown).
  // `rx` is the loop's one scratch record, refilled by each frame's parse (not zeroed per frame).
  // Counts the frame under its outcome (LcoreIo::settle).
  void handle_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept;
  void route_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept;
  void handle_arp(const Rx& rx, const Snapshot& s) noexcept;
  void handle_icmp(rte_mbuf* m, Rx& rx, const Snapshot& s) noexcept;
  // Whether an ARP request or ICMP echo from (src_mac, src_ip) on port `port` gets an answer: never to a
  // multicast/broadcast MAC or a 0.0.0.0, multicast or broadcast IPv4 source, and at most limits.arp_icmp_*
  // answers per port (a token bucket). Counts the refusal.
  bool may_answer(uint16_t port, const MacAddr& src_mac, uint32_t src_ip, const Snapshot& s) noexcept;
  // The job's gate (gate.hpp) on the phub packet in rx, once per frame: on the lcore that received it, before
  // a hand-off to lcore `owner`; the owner takes the verdict the frame carries (from_ring). Fills
  // rx.previous_key and rx.join; counts a drop against the job and returns false.
  bool pass_gate(Rx& rx, const Snapshot& s, uint16_t job_index, uint16_t owner, bool from_ring) noexcept;
  // Enqueue a frame of job `job_index` that passed the gate for lcore `owner`, within the job's share of the
  // slots (else counted handoff_share_full against the job and freed), stamped with the gate's verdict; the
  // owner gives the slot back as it dequeues.
  void hand_off(rte_mbuf* m, const Snapshot& s, uint16_t job_index, uint16_t owner, uint16_t port_id,
                bool previous_key) noexcept;
  void give_back_handoff_slot(const rte_mbuf* m, const Snapshot& s) noexcept;
  // The job's handler on this lcore (job_handler.hpp), for job `j` of snapshot `s`.
  [[nodiscard]] JobHandler handler(const Snapshot& s, size_t j) noexcept;
  // Checkpoint captures (lcore_checkpoint.cpp): the background copy of every job's attached capture
  // (JobHandler::copy_capture_slice); the iteration's checkpoint work into
  // max_checkpoint_work_ns and checkpoint_work_over_100us.
  void copy_captures(const Snapshot& s) noexcept;
  void account_checkpoint_work() noexcept;
  // The 1 ms tick's scan of every job's chunks: rounds stalled past timeouts.round_stall_ms are reported to
  // their ranks; a hierarchical job's peer hubs are resolved, told its state, and sent the pieces due again.
  void scan_stalls(const Snapshot& s, uint64_t now) noexcept;
  // A hub's MAC seen in an ARP packet from `ip`: stored for every hierarchical job that has a hub there.
  void learn_hub_mac(const Snapshot& s, uint32_t ip, const MacAddr& mac) noexcept;

  LcoreIo io_;  // resources, counters, transmit buffers, the iteration's state: what the handlers use
  // Loop state (lcore.cpp).
  uint64_t next_timer_ = 0;
  uint64_t last_drain_ = 0;
  uint64_t last_quiescent_ = 0;
  std::array<uint64_t, kGapBoundsUs.size()> gap_bounds_tsc_{};  // kGapBoundsUs in TSC cycles
  uint32_t idle_polls_ = 0;
  std::optional<RealtimePolicy> realtime_;
  std::atomic<bool> looping_{false};
  struct AnswerBucket {
    double tokens = 0;
    uint64_t last_tsc = 0;  // 0: not used yet (starts full)
  };
  std::vector<AnswerBucket, SocketAllocator<AnswerBucket>> answers_;  // per port: ARP and ICMP answers (may_answer)
  // Cycles by stage (the stage_* counters): one frame in kStageSampleEvery is timed (a TSC read costs 20-40
  // cycles); while it is handled, io_.timing is set and the marks below fill in. A prime, so that the timed
  // frames do not keep landing on the same rank's pushes of a job of 2, 4, 8 ... workers (only the last
  // push of a segment seals its results).
  static constexpr uint32_t kStageSampleEvery = 61;
  uint32_t stage_countdown_ = kStageSampleEvery;
  uint64_t stage_start_ = 0, stage_parsed_ = 0, stage_gated_ = 0;  // TSC marks (0: not reached)
  uint64_t stage_tx_before_ = 0;    // io_.counters.tx_burst_tsc when it started
  void start_timing() noexcept;
  void finish_timing(const Rx& rx) noexcept;
  static constexpr uint32_t kStoppedCopiesPerCall = 1024;  // copy_captures calls per stopped lcore's serving
  rte_mbuf* burst_[kMaxBurst];  // the frames of the current RX or inbox burst
};
static_assert(alignof(Lcore) <= RTE_CACHE_LINE_SIZE, "OnSocket aligns to a cache line");

}  // namespace phub::engine
