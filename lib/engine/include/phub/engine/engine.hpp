// The data plane as a whole: pools, ports, job admission, steering, hand-off and request rings, RCU, the
// lcores, and live change. Built and driven by the control thread after the EAL is up; the lcores run
// between start() and stop().
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/base/realtime.hpp"
#include "phub/config/config.hpp"
#include "phub/config/interface_map.hpp"
#include "phub/config/numa_placement.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"
#include "phub/engine/checkpoint_capture.hpp"
#include "phub/engine/config_diff.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/requests.hpp"
#include "phub/engine/snapshot.hpp"

namespace phub::engine {

class Lcore;  // lcore.hpp, private to lib/engine

// Counters summed over lcores (the tests' and the stats line's view). jobs: by index in the current snapshot.
struct Totals {
  LcoreCounters lcores;            // lcore counters, and every drop: the lcores' and all jobs' together
  std::vector<JobCounters> jobs;
};

// Everything the counters say, for the exporters (text, JSON, telemetry, Prometheus).
struct CounterReport {
  struct Lcore {
    unsigned lcore_id = 0;
    uint16_t index = 0;
    LcoreCounters counters;
  };
  struct Job {
    uint32_t id = 0;
    std::string name;
    uint16_t epoch = 0;          // of the lcore with the newest epoch
    bool draining = false;       // on any lcore
    uint64_t open_rounds = 0;
    JobCounters counters;        // summed over lcores
    // Hierarchical jobs: each other rack's hub, as this hub's lcores saw it (docs/hierarchy.md).
    struct HubPeer {
      std::string rack;
      uint32_t ipv4 = 0;
#define PHUB_X(name, help) uint64_t name = 0;  // summed over the lcores
      PHUB_HUB_PEER_COUNTERS(PHUB_X)
#undef PHUB_X
      uint64_t answer_age_ms = UINT64_MAX;  // since its last verified forward or hub_state (UINT64_MAX: never)
      // The resend timer of partials towards it (docs/hierarchy.md), the largest of the lcores': the smoothed
      // round trip from a partial to its result (0: no sample yet) and the wait before a resend.
      uint64_t srtt_us = 0, rto_us = 0;
      // Its hierarchy fingerprint: "unknown" (no fresh hub_state yet), "equal" or "differs"; and then the
      // components that differ, by name (fingerprint_component_name's first word: racks, ranks_by_rack, ...).
      std::string fingerprint = "unknown";
      std::vector<std::string> fingerprint_differs;
      // No verified forward or hub_state from it within timeouts.round_stall_ms (since the job started, if
      // none ever came). Never with round_stall_ms 0.
      bool unreachable = false;
    };
    std::vector<HubPeer> hubs;
  };
  struct Port {
    std::string name;
    drivers::PortStats stats;
  };
  // An mbuf pool of the engine (receive, headers, result references, copies): mbufs out of the pool
  // (received and not yet freed, queued for transmit, in a descriptor ring) and mbufs in it, per-lcore
  // caches included. A gauge, read with rte_mempool_in_use_count/avail_count (control thread only).
  struct Pool {
    std::string name;
    unsigned size = 0, in_use = 0, avail = 0;
  };
  std::vector<Lcore> lcores;
  std::vector<Job> jobs;
  std::vector<Port> ports;
  std::vector<Pool> pools;
  uint64_t tsc_hz = 0;
};

// The numbers of a peer hub that the outputs show (phub-ctl job, stats --json and Prometheus; not the telemetry
// commands), from this one table: the counters of PHUB_HUB_PEER_COUNTERS, then gauges; a flag is a gauge of 0
// or 1 that phub-ctl job shows in words.
struct HubPeerField {
  std::string_view name;
  std::string_view help;
  uint64_t (*get)(const CounterReport::Job::HubPeer&);
  bool gauge;
  bool flag = false;
};
inline constexpr HubPeerField kHubPeerFields[] = {
#define PHUB_X(name, help) {#name, help, [](const CounterReport::Job::HubPeer& p) { return p.name; }, false},
    PHUB_HUB_PEER_COUNTERS(PHUB_X)
#undef PHUB_X
    {"srtt_us", "smoothed time from a partial to the peer hub until its result, in microseconds (0: no sample yet)",
     [](const CounterReport::Job::HubPeer& p) { return p.srtt_us; }, true},
    {"rto_us", "wait for the peer hub's result before partials are sent again, in microseconds",
     [](const CounterReport::Job::HubPeer& p) { return p.rto_us; }, true},
    {"unreachable", "1: nothing verified from the peer hub within timeouts.round_stall_ms",
     [](const CounterReport::Job::HubPeer& p) { return uint64_t{p.unreachable}; }, true, true},
    {"fingerprint_mismatch", "1: the peer hub's hierarchy fingerprint differs from this hub's (its forwards are dropped)",
     [](const CounterReport::Job::HubPeer& p) { return uint64_t{!p.fingerprint_differs.empty()}; }, true, true},
};

// Every counter of a report, one "name value" list per lcore, job and port, and the drops (text form).
[[nodiscard]] std::string format_report(const CounterReport& r);

// What a reload did.
struct ReloadOutcome {
  ConfigDiff diff;
  uint64_t grace_ns = 0;     // the RCU grace period waited for after the swap
  uint64_t drain_ns = 0;     // waited for removed jobs' rounds to finish
  bool drain_timed_out = false;
};

// A checkpoint written (Engine::checkpoint).
struct CheckpointWritten {
  std::filesystem::path file;
  uint32_t round = 0;        // the state after this round
  uint16_t epoch = 0;
  uint64_t step = 0;         // optimizer updates in it
  uint64_t state_bytes = 0;  // the fp32 state it holds
  uint64_t file_bytes = 0;
  uint64_t copy_ns = 0;      // from the request until the last chunk was copied by its lcore
  uint64_t write_ns = 0;     // compressing, writing, fsync and rename
  size_t pruned = 0;         // older files removed (checkpoint.keep)
};

class Engine {
 public:
  // Opens the ports, plans and admits every job (refusing what exceeds a quota or the server's memory),
  // installs steering rules, and prepares one Lcore per configured lcore. Nothing polls yet.
  [[nodiscard]] static Expected<std::unique_ptr<Engine>, std::string> create(const config::Config& cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Launches the lcores. With `realtime` (the policy the process inherited, drivers::Eal::realtime) each lcore
  // runs under it, and a polling back-off that would spin there is refused first, naming the lcore
  // (phub/base/realtime.hpp): a busy-polling lcore needs CPUs that no other lcore, the main one included, has.
  [[nodiscard]] Expected<void, std::string> start(const std::optional<RealtimePolicy>& realtime = std::nullopt);
  void stop();

  // Live change (control thread; the lcores keep running). Diffs `next` against the running config,
  // refuses it whole if any difference needs a restart or a job cannot be admitted (every reason, each
  // naming its field), else prepares what new or changed jobs need, drains removed jobs (at most
  // timeouts.drain_ms), publishes one new snapshot, waits for every lcore to pass a quiescent state and
  // retires the old one. Unchanged jobs keep their state, rounds and counters. `waiting`, if set, is called
  // about every millisecond while the drain waits (the server pings systemd's watchdog from it).
  [[nodiscard]] Expected<ReloadOutcome, std::vector<std::string>> apply(const config::Config& next,
                                                                      const std::function<void()>& waiting = {});
  // Ask every lcore to start no new round of the job / restart its rounds in a new epoch (control thread).
  [[nodiscard]] Expected<void, std::string> drain(std::string_view job_name);
  [[nodiscard]] Expected<void, std::string> reset(std::string_view job_name);
  // Checkpoints of ps jobs (control thread; checkpoint.cpp). checkpoint() takes one now: each chunk's
  // state after the newest round boundary is copied by its lcore, then this thread writes the file into
  // the job's checkpoint.dir and prunes to checkpoint.keep. Returns the file, or why not: among others,
  // no round boundary and copy within `boundary_wait` plus the time the copy may take for the state's size
  // (copy_allowance). The heartbeat is called throughout, the write included.
  [[nodiscard]] Expected<CheckpointWritten, std::string> checkpoint(
      std::string_view job_name, std::chrono::milliseconds boundary_wait = std::chrono::seconds(5));
  // Called by the control thread over and over while a checkpoint waits for its copy or writes its file
  // (every 200 us and every 1 MiB block): phub-server feeds systemd's watchdog with it, so that a state of any
  // size can be written within WatchdogSec. Empty: nothing is called.
  void set_heartbeat(std::function<void()> heartbeat) { heartbeat_ = std::move(heartbeat); }
  // Takes the checkpoints that checkpoint.every_rounds / every_s make due; one log line per attempt.
  [[nodiscard]] std::vector<std::string> checkpoint_due();
  // What the start-up restore did, one line per job and per file skipped (also in startup_lines()).
  [[nodiscard]] const std::vector<std::string>& restore_lines() const noexcept { return restore_lines_; }
  // Frees the memory of removed jobs once no transmit points into it (control thread, periodically).
  void collect_retired();
  [[nodiscard]] size_t retired_jobs() const noexcept { return retired_.size(); }

  // Start-up report: kernels, ports and steering, admitted jobs, one line per lcore.
  [[nodiscard]] std::vector<std::string> startup_lines() const;
  // One line per port: which lcore polls each of its RX queues ("port p0: rx q0 lcore 1, q1 lcore 2; tx one
  // queue per lcore"). In startup_lines() and phub-ctl status.
  [[nodiscard]] std::vector<std::string> queue_lines() const;
  [[nodiscard]] CounterReport report() const;
  [[nodiscard]] Totals totals() const;
  // Every non-zero counter, one "name value" per line, grouped (for exit and on demand).
  [[nodiscard]] std::string format_counters() const;
  // Control thread: one log line for each peer hub of a hierarchical job whose state changed since the last
  // call: its fingerprint found to differ (naming the components), or it became unreachable or answered
  // again (docs/hierarchy.md, "Reachability and failure"). phub-server prints them.
  [[nodiscard]] std::vector<std::string> hub_events();
  [[nodiscard]] const Snapshot& snapshot() const noexcept { return *current_; }
  [[nodiscard]] const config::Config& config() const noexcept { return *current_->config; }
  // Bytes the data plane really allocated for a job (sum over its lcores), by index in the snapshot.
  [[nodiscard]] uint64_t job_allocated_bytes(size_t job_index) const;
  // Mbufs of the transmit pools (headers, result payload references, copies) not back in their pool:
  // frames queued or in flight. Zero once everything sent has been transmitted and freed.
  [[nodiscard]] unsigned transmit_mbufs_in_use() const;
  [[nodiscard]] const std::vector<std::unique_ptr<drivers::EthPort>>& ports() const noexcept { return ports_; }
  [[nodiscard]] const std::vector<std::unique_ptr<Lcore>>& lcores() const noexcept { return lcores_; }
  // Where the pools and each lcore's state are (config::place_memory, from the EAL's sockets).
  [[nodiscard]] const config::Placement& placement() const noexcept { return placement_; }

 private:
  Engine() = default;
  Expected<void, std::string> open_ports(const config::Config& cfg);
  std::vector<PortInfo> port_infos(const config::Config& cfg) const;
  [[nodiscard]] Expected<std::shared_ptr<JobRuntime>, std::string> make_runtime(const JobPlan& plan,
                                                                              const config::Config& cfg) const;
  [[nodiscard]] std::shared_ptr<Snapshot> build_snapshot(std::shared_ptr<const config::Config> cfg,
                                                         std::vector<std::shared_ptr<const JobPlan>> plans,
                                                         std::vector<std::shared_ptr<JobRuntime>> runtimes) const;
  [[nodiscard]] Expected<void, std::string> install_steering(const Snapshot& s);
  Expected<void, std::string> build_lcores(const config::Config& cfg);
  void publish(std::shared_ptr<const Snapshot> next, ReloadOutcome* outcome);
  // Sends `kind` for job `id` to every lcore and waits for all answers (or stopped lcores).
  [[nodiscard]] Expected<void, std::string> ask_lcores(RequestKind kind, std::string_view job_name);
  [[nodiscard]] Expected<void, std::string> ask_lcores(const Request& request);
  // Restores each ps job's newest valid checkpoint before the lcores start (Engine::create).
  [[nodiscard]] Expected<void, std::string> restore_checkpoints();
  // When a run with fresh weights started on the job since the last look, sets its earlier run's checkpoint
  // files aside (persist::supersede_checkpoints) and says so (control thread, checkpoint.cpp).
  [[nodiscard]] std::optional<std::string> supersede_if_fresh(size_t job_index);
  // One capture attempt of the state after the newest completed round (checkpoint.cpp).
  [[nodiscard]] Expected<void, std::string> capture_once(size_t job_index, CheckpointCapture& cap,
                                                        std::chrono::steady_clock::time_point deadline, bool& retry);

  // Declaration order is destruction order reversed: lcores stop first, ports close (freeing in-flight
  // mbufs that reference result buffers) before the job memory and the pools go.
  // Prefix of this engine's pool and ring names, distinct per engine in the process ("phub_", "phub2_", ...):
  // several engines can share one EAL (the hubs of a hierarchy test).
  std::string names_ = "phub_";
  // The transmit pools of one socket: headers (results, errors, ARP), result references, and full copies
  // (only where some port cannot send chains or says tx_copy).
  struct TxPools {
    drivers::Mempool hdr, ext, copy;
  };
  std::vector<TxPools> tx_pools_;  // one set per socket of config::Placement::tx_pool_sockets
  std::vector<drivers::Mempool> rx_pools_;
  std::shared_ptr<const Snapshot> current_;            // the published snapshot, owned here
  std::vector<std::shared_ptr<JobRuntime>> retired_;   // removed jobs, freed by collect_retired()
  std::vector<std::unique_ptr<drivers::EthPort>> ports_;
  std::vector<std::vector<rte_ring*>> rings_;  // [src][dst] hand-off
  std::vector<rte_ring*> requests_, responses_;  // per lcore
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::vector<std::unique_ptr<Lcore>> lcores_;  // each on its lcore's socket
  std::atomic<const Snapshot*> published_{nullptr};
  std::atomic<bool> stop_{false};
  bool running_ = false;
  const agg::Kernels* kernels_ = nullptr;
  proto::AuthKey cookie_key_;  // random, drawn by create(): address cookies of this server run
  proto::ChallengeKey challenge_key_{};  // random, drawn by create(): join challenges of this server run
  std::vector<std::string> steering_lines_;
  config::QueueMap queues_;  // which lcore polls which RX queue of each port
  // "chunk map: lcore 1 -> p0 (198.18.0.1), ...; elems per port p0 N, p1 M" of a job with interface_map.
  [[nodiscard]] std::string interface_line(const config::Config& cfg, const JobPlan& plan) const;
  config::InterfaceMap interfaces_;  // each lcore's home port: where interface_map jobs' workers send its chunks
  config::Placement placement_;  // the socket of each pool and lcore
  std::vector<std::vector<uint16_t>> steered_;  // per port: the UDP ports with a flow rule, by queue order
  std::vector<std::string> restore_lines_;
  struct CheckpointSchedule {
    std::chrono::steady_clock::time_point last;  // the last checkpoint (or the first look at the job)
    uint32_t last_round = 0;
    bool has_round = false;
    uint16_t epoch = 0;
  };
  std::map<uint32_t, CheckpointSchedule> schedules_;  // by job id
  std::function<void()> heartbeat_;  // set_heartbeat
  // By job id: the runtime whose fresh-weights starts were counted last, and how many (supersede_if_fresh).
  std::map<uint32_t, std::pair<const LcoreJob*, uint32_t>> fresh_seen_;
  // What hub_events last said of each (job id, peer rack): the differing components, and unreachable.
  std::map<std::pair<uint32_t, std::string>, std::pair<std::vector<std::string>, bool>> hub_said_;
};

}  // namespace phub::engine
