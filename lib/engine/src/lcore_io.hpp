// What a poll-mode lcore lends the job handlers that run on it (job_handler.hpp): its resources and counters,
// its transmit buffers, the state of the loop iteration (snapshot, TSC), and the outcome of the frame being
// handled. The lcore (lcore.hpp) owns one and runs the loop around it; the handlers read the loop's state,
// queue what they send, count their messages and checkpoint work, and name what became of the frame.
#pragma once

#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "phub/drivers/eth_port.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/engine/snapshot.hpp"
#include "phub/engine/socket_memory.hpp"
#include "phub/engine/tx_buffer.hpp"
#include "phub/config/queue_map.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {

struct LcoreResources {
  uint16_t index = 0;       // position in Config::lcores: owner index, TX queue index, UDP port offset
  unsigned lcore_id = 0;    // EAL lcore id
  int socket = -1;          // NUMA socket of its state (config::Placement::lcore_socket; -1: any)
  std::vector<config::RxQueue> rx_queues;          // the (port index, RX queue) pairs it polls (config::QueueMap)
  // Every lcore's home port, by lcore index (config::InterfaceMap): where jobs with interface_map take its
  // chunks. This lcore's is home_ports[index]; the others' tell a join that reached the wrong port where to go.
  std::vector<uint16_t> home_ports;
  std::vector<const drivers::EthPort*> ports;      // every port, by index (TX goes anywhere)
  rte_mempool* hdr_pool = nullptr;    // header mbufs (results, errors, ARP)
  rte_mempool* ext_pool = nullptr;    // data-room-0 mbufs attached to result buffers
  rte_mempool* copy_pool = nullptr;   // full mbufs for ports that cannot chain
  std::vector<rte_ring*> inbox;       // rings other lcores hand this one its packets through
  std::vector<rte_ring*> outbox;      // outbox[owner]: ring to hand a packet to lcore `owner` (null: self)
  rte_ring* requests = nullptr;       // from the control thread (Request*)
  rte_ring* responses = nullptr;      // back to it
  const std::atomic<const Snapshot*>* snapshot = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  const std::atomic<bool>* stop = nullptr;
  uint32_t idle_polls_before_sleep = 0;
  uint32_t idle_sleep_us = 0;
};

struct LcoreIo {
  static constexpr uint16_t kMaxBurst = 32;  // frames taken from a queue or inbox at once

  explicit LcoreIo(LcoreResources r);
  LcoreIo(const LcoreIo&) = delete;  // the transmit buffers point at tx_pool_lent
  LcoreIo& operator=(const LcoreIo&) = delete;

  // What became of the frame being handled: the first outcome named wins (a push is taken once summed, so one
  // whose result then finds no mbuf stays taken). The lcore counts each frame under its outcome: accepted,
  // frames_dropped (a named drop or malformed), redirected_out, or unaccounted when no handler named one.
  enum class Outcome : uint8_t { none, taken, dropped, handed_off };
  void settle(Outcome o) noexcept {
    if (outcome == Outcome::none) outcome = o;
  }
  // A handler took the frame: it is summed, answered, learnt from, or a duplicate that is answered again.
  void take() noexcept { settle(Outcome::taken); }
  // A drop no job is known for, and one counted against a job.
  void count_drop(Drop d) noexcept {
    bump(counters.drops[static_cast<size_t>(d)]);
    settle(Outcome::dropped);
  }
  void count_drop(LcoreJob& lj, Drop d) noexcept {
    bump(lj.counters.drops[static_cast<size_t>(d)]);
    settle(Outcome::dropped);
  }
  void count_malformed(proto::ParseError e) noexcept {
    bump(counters.malformed[static_cast<size_t>(e)]);
    settle(Outcome::dropped);
  }
  // A received frame that is done with: freed with the rest of its burst (release_consumed).
  void consume(rte_mbuf* m) noexcept {
    if (consumed_n == kMaxBurst) release_consumed();
    consumed[consumed_n++] = m;
  }
  void release_consumed() noexcept {
    rte_pktmbuf_free_bulk(consumed, consumed_n);
    consumed_n = 0;
  }
  // Queue a reply of the job on port `port` within the job's guarantee of the transmit buffers or what it
  // may borrow (else counted tx_share_full against the job and freed): true if queued.
  bool queue_tx(LcoreJob& lj, uint16_t port, rte_mbuf* m) noexcept;

  LcoreResources res;
  LcoreCounters counters;
  std::vector<TxBuffer, SocketAllocator<TxBuffer>> tx;  // per port, on the lcore's socket
  uint64_t tx_pool_lent = 0;  // slots of the transmit buffers' pool that jobs borrowed (tenant_shares.hpp)
  const Snapshot* snap = nullptr;  // the loop iteration's
  uint64_t hz = 0;                 // TSC cycles per second
  uint64_t now_tsc = 0;            // TSC at the start of the current loop iteration
  uint32_t seq = 0;                // the number of this lcore's next message sealed under a job key
  Outcome outcome = Outcome::none;  // of the frame being handled (settle)
  // Set while the frame being handled is timed by stage (the lcore's stage_* counters): the cycles spent
  // sealing its answers add up in stage_seal_tsc.
  bool timing = false;
  uint64_t stage_seal_tsc = 0;
  uint32_t capturing = 0;           // jobs with a checkpoint capture attached on this lcore
  uint64_t checkpoint_work_ns = 0;  // thread CPU time of this iteration's checkpoint work
  rte_mbuf* consumed[kMaxBurst];
  uint16_t consumed_n = 0;
};

}  // namespace phub::engine
