// The data plane as a whole: pools, ports, job admission, steering, hand-off rings, RCU, and the lcores.
// Built by the control thread after the EAL is up; the lcores run until stop().
#pragma once

#include <rte_rcu_qsbr.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"
#include "phub/engine/lcore.hpp"
#include "phub/engine/snapshot.hpp"

namespace phub::engine {

// Counters summed over lcores.
struct Totals {
  LcoreCounters lcores;
  std::vector<JobCounters> jobs;  // by job index
};

class Engine {
 public:
  // Opens the ports, plans and admits every job (refusing what exceeds a quota or the server's memory),
  // installs steering rules, and prepares one Lcore per configured lcore. Nothing polls yet.
  [[nodiscard]] static Expected<std::unique_ptr<Engine>, std::string> create(const config::Config& cfg);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  [[nodiscard]] Expected<void, std::string> start();
  void stop();

  // Start-up report: kernels, ports and steering, admitted jobs, one line per lcore.
  [[nodiscard]] std::vector<std::string> startup_lines() const;
  [[nodiscard]] Totals totals() const;
  // Every non-zero counter, one "name value" per line, grouped (for exit and on demand).
  [[nodiscard]] std::string format_counters() const;
  [[nodiscard]] const Snapshot& snapshot() const noexcept { return *snapshot_.load(); }
  // Bytes the data plane really allocated for a job (sum over its lcores).
  [[nodiscard]] uint64_t job_allocated_bytes(size_t job_index) const;
  // Mbufs of the transmit pools (headers, result payload references, copies) not back in their pool:
  // frames queued or in flight. Zero once everything sent has been transmitted and freed.
  [[nodiscard]] unsigned transmit_mbufs_in_use() const;
  [[nodiscard]] const std::vector<std::unique_ptr<drivers::EthPort>>& ports() const noexcept { return ports_; }

 private:
  Engine() = default;
  Expected<void, std::string> open_ports(const config::Config& cfg);
  Expected<void, std::string> plan_jobs(Snapshot& s, const config::Config& cfg);
  Expected<void, std::string> allocate_jobs(Snapshot& s, const config::Config& cfg);
  void install_steering(const config::Config& cfg, const Snapshot& s);
  Expected<void, std::string> build_lcores(const config::Config& cfg);

  // Declaration order is destruction order reversed: lcores stop first, ports close (freeing in-flight
  // mbufs that reference result buffers) before the job memory and the pools go.
  drivers::Mempool hdr_pool_, ext_pool_, copy_pool_;
  std::vector<drivers::Mempool> rx_pools_;
  std::vector<std::vector<std::unique_ptr<LcoreJob>>> lcore_jobs_;  // [lcore][job]
  std::unique_ptr<Snapshot> owned_snapshot_;
  std::vector<std::unique_ptr<drivers::EthPort>> ports_;
  std::vector<std::vector<rte_ring*>> rings_;  // [src][dst]
  rte_rcu_qsbr* qsbr_ = nullptr;
  std::vector<std::unique_ptr<Lcore>> lcores_;
  std::atomic<const Snapshot*> snapshot_{nullptr};
  std::atomic<bool> stop_{false};
  bool running_ = false;
  const agg::Kernels* kernels_ = nullptr;
  std::vector<std::string> steering_lines_;
};

}  // namespace phub::engine
