// One generator lcore: it owns a set of RX/TX queue pairs (one per server lcore it drives), one Partition
// per job (the emulated workers' state for the chunks those server lcores own), and runs the poll loop:
// receive and verify results, hand misdelivered ones to their owner, build and send pushes, inject faults.
// The control thread steers it only through post() (start, drain, finish, exit) and reads its counters.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "phub/base/realtime.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/gen/counters.hpp"
#include "phub/gen/partition.hpp"
#include "phub/gen/push_frame.hpp"
#include "settings.hpp"
#include "worker_sessions.hpp"

namespace phub::pktgen {

// A job as every lcore uses it (read-only while lcores run).
struct JobRuntime {
  gen::Workload wl;
  gen::WorkerAddrs addrs;
  const std::byte* push_area = nullptr;  // copy of wl.push_block() in DPDK memory (zero-copy payloads)
  const std::byte* init_area = nullptr;  // copy of wl.init_block()
  rte_iova_t push_iova = 0, init_iova = 0;
  bool iova_contiguous = true;           // else each payload's IOVA is looked up
  // A session job's sessions (worker_sessions.hpp), null for others. Each (rank, server lcore) entry is used
  // only by the generator lcore that drives that server lcore, once the handshake is done.
  JobSessions* sessions = nullptr;
};

struct LcoreCounters {
  gen::Counter tx_packets, tx_bytes, tx_full;  // tx_full: dropped because the TX queue stayed full
  gen::Counter rx_packets, rx_bytes;
  gen::Counter rx_echo, rx_echo_bytes;      // our own pushes coming back (a forwarder, e.g. testpmd io)
  gen::Counter rx_malformed, rx_bad_tag, rx_unknown_job, rx_other;
  gen::Counter rx_replayed;                 // session jobs: a number its session has received already
  gen::Counter handed_off, arp_replies, no_mbuf;
  gen::Counter recycled, recycle_busy;      // pushes sent from a recycled frame; pushes built: every frame held
  gen::Counter loops, idle_loops;           // poll-loop iterations, and those that found nothing to do
  std::array<gen::Counter, gen::kFaultCount> faults;
};

enum class Cmd : uint32_t { none, start, drain, finish, exit };

struct LcoreResources {
  uint16_t index = 0;                   // position among generator lcores
  unsigned lcore_id = 0;
  const drivers::EthPort* port = nullptr;
  std::vector<uint16_t> queues;         // RX queues it polls
  std::vector<uint16_t> owners;         // the server lcores it drives (their TX queues are its own, queue `index` too)
  uint16_t port_queues = 1;             // TX queues on the port
  std::vector<uint16_t> owner_queue;    // by server lcore: the TX queue that serves it (kNotDriven: none, --owners)
  std::vector<JobRuntime>* jobs = nullptr;
  rte_mempool* hdr_pool = nullptr;      // small mbufs for headers
  rte_mempool* ext_pool = nullptr;      // data-room-0 mbufs for zero-copy payloads
  rte_mempool* full_pool = nullptr;     // whole frames (copy mode, faults, ARP)
  bool zero_copy = true;
  uint32_t idle_sleep_us = 0;
  std::optional<RealtimePolicy> realtime;  // the policy the lcore runs under (the process's, inherited)
  uint64_t frame_cache_bytes = 0;       // budget for pre-built frames of jobs whose rounds wrap (0: none)
  uint32_t recycle_depth = 0;           // recycled frames per (payload pattern, rank) of a job (0: none)
};

class GenLcore {
 public:
  explicit GenLcore(LcoreResources r);
  ~GenLcore();
  GenLcore(const GenLcore&) = delete;
  GenLcore& operator=(const GenLcore&) = delete;

  // Wire the hand-off: owner_lcore[o] is the generator lcore driving server lcore o.
  void connect(std::vector<GenLcore*> peers, std::vector<uint16_t> owner_lcore);
  [[nodiscard]] bool ok() const noexcept { return inbox_ != nullptr; }

  int run() noexcept;
  // Control thread: post a command and wait until the lcore has carried it out.
  void post(Cmd c, const RunSettings& s, double rate_share_pps, bool inject);

  [[nodiscard]] bool settled() const noexcept { return settled_.load(std::memory_order_acquire); }
  [[nodiscard]] bool rounds_done() const noexcept { return rounds_done_.load(std::memory_order_acquire); }
  [[nodiscard]] const LcoreCounters& counters() const noexcept { return c_; }
  [[nodiscard]] const std::vector<std::unique_ptr<gen::Partition>>& partitions() const noexcept { return parts_; }
  [[nodiscard]] const LcoreResources& resources() const noexcept { return r_; }
  // Pre-build the frames of jobs whose rounds wrap, and the recycled frames (once, before the lcore runs: the
  // addresses are known).
  void build_caches();
  // Pre-built frames of job `j` on this lcore (0: built one by one).
  [[nodiscard]] size_t cached_frames(size_t j) const noexcept;

 private:
  static constexpr size_t kTxSlots = 2048;  // a power of two: positions wrap with a mask
  struct TxQueue {
    std::vector<rte_mbuf*> pkts = std::vector<rte_mbuf*>(kTxSlots);
    size_t head = 0, count = 0;
    uint64_t retry_ns = 0;  // the queue was full: leave it alone until then
  };

  void execute(Cmd c, uint64_t now) noexcept;
  void rx(rte_mbuf* m, uint64_t now) noexcept;
  void handle_arp(rte_mbuf* m) noexcept;
  uint32_t generate(uint64_t now) noexcept;
  uint32_t send_orders(size_t job, std::span<const gen::PushOrder> orders) noexcept;
  // A push sent from a pre-built or recycled frame, or null: build it.
  rte_mbuf* reuse_frame(size_t job, const gen::PushOrder& o) noexcept;
  // `fresh`: an mbuf of the full pool to build into (null: allocate one).
  rte_mbuf* build_push(size_t job, const gen::PushOrder& o, rte_mbuf* fresh) noexcept;
  // A session job's push, built or recycled: seal it under its rank's session with the server lcore it goes to.
  void seal_push(size_t job, const gen::PushOrder& o, rte_mbuf* m) noexcept;
  // A session job's answer: whether it opens under its rank's session with `owner` (counted if not).
  [[nodiscard]] bool open_answer(const JobRuntime& job, uint16_t owner, const proto::PhubFrame& f,
                                 std::span<const std::byte> frame) noexcept;
  // Whether the job's pushes are built whole (payload copied) rather than chained to its template.
  [[nodiscard]] bool copies_payload(size_t job) const noexcept;
  static constexpr size_t kMaxOrders = 32;  // pushes ordered per job and loop iteration
  uint32_t inject_faults(uint64_t now) noexcept;
  void enqueue(uint16_t queue, rte_mbuf* m) noexcept;
  // Queue `n` packets on `queue`; those that do not fit are freed and counted as tx_full.
  void enqueue_run(uint16_t queue, rte_mbuf* const* ms, size_t n) noexcept;
  void flush(uint64_t now) noexcept;
  [[nodiscard]] size_t pending() const noexcept;
  [[nodiscard]] uint16_t queue_of(uint16_t owner) const noexcept { return r_.owner_queue[owner]; }

  LcoreResources r_;
  LcoreCounters c_;
  std::vector<std::unique_ptr<gen::Partition>> parts_;  // by job index
  std::vector<rte_mbuf_ext_shared_info> shinfo_;        // by job index: zero-copy payload references
  std::vector<std::unique_ptr<class FrameCache>> cache_;  // by job index: pre-built frames
  std::vector<std::unique_ptr<class RecycledFrames>> recycled_;  // by job index
  std::vector<TxQueue> txq_;                            // by port queue
  std::vector<GenLcore*> peers_;
  std::vector<uint16_t> owner_lcore_;
  rte_ring* inbox_ = nullptr;
  uint32_t seq_ = 0;

  // control
  std::atomic<uint32_t> cmd_seq_{0}, ack_seq_{0};
  Cmd cmd_ = Cmd::none;
  RunSettings settings_;
  double rate_share_pps_ = 0;
  bool inject_ = false;
  std::atomic<bool> settled_{true}, rounds_done_{false};
  bool active_ = false;

  // open loop pacing and fault injection
  double tokens_ = 0;
  uint64_t tokens_ns_ = 0;
  size_t open_rr_ = 0;
  std::array<uint64_t, gen::kFaultCount> faults_left_{};
  size_t fault_job_ = 0;
  uint64_t pushes_since_fault_ = 0;
};

// Nanoseconds from the TSC (monotonic, for the state machines).
[[nodiscard]] uint64_t now_ns() noexcept;

}  // namespace phub::pktgen
