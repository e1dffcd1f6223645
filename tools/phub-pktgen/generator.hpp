// The DPDK side of phub-pktgen: mempools, the port, the jobs' payload templates in DPDK memory, and the
// generator lcores; runs are started, drained and finished from the control thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lcore.hpp"
#include "phub/base/expected.hpp"
#include "phub/drivers/eth_port.hpp"
#include "phub/drivers/mempool.hpp"
#include "settings.hpp"
#include "target.hpp"

namespace phub::pktgen {

struct GenConfig {
  PortSettings port;
  Target target;
  uint32_t worker_ip = 0;           // first worker address; 0: derived from the job's allowed sources or the server
  std::optional<RealtimePolicy> realtime;  // inherited by the process (drivers::Eal::realtime): the lcores run under it
};

class Generator {
 public:
  [[nodiscard]] static Expected<std::unique_ptr<Generator>, std::string> create(const GenConfig& cfg);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Wait for the link, then learn the server's MAC by ARP unless it was given. An unanswered ARP restarts
  // the port (a memif reconnect) if `may_restart`; else, and if the restarts do not help, it fails with
  // `arp_unanswered()` true.
  [[nodiscard]] Expected<void, std::string> resolve(double timeout_s, bool may_restart);
  [[nodiscard]] bool arp_unanswered() const noexcept { return arp_unanswered_; }
  [[nodiscard]] Expected<void, std::string> start(const RunSettings& s);
  void drain();
  void finish();
  [[nodiscard]] bool settled() const;
  [[nodiscard]] bool rounds_done() const;
  // Stop the lcores (after this, counters and mismatch examples are stable).
  void shutdown();

  [[nodiscard]] const std::vector<std::unique_ptr<GenLcore>>& lcores() const noexcept { return lcores_; }
  [[nodiscard]] const std::vector<JobRuntime>& jobs() const noexcept { return *jobs_; }
  [[nodiscard]] const drivers::EthPort& port() const noexcept { return *port_; }
  [[nodiscard]] std::vector<std::string> startup_lines() const;

 private:
  Generator() = default;
  Expected<void, std::string> place_templates();
  Expected<void, std::string> wait_link(std::chrono::steady_clock::time_point deadline);
  bool arp_exchange(std::chrono::steady_clock::time_point until);
  Expected<void, std::string> launch();
  // Before the lcores start: every rank of each session job joins every server lcore.
  [[nodiscard]] Expected<void, std::string> join_sessions();
  void register_hparams();  // before the lcores start: the jobs' hyperparameter sets to every server lcore
  void post_all(Cmd c, const RunSettings& s);

  GenConfig cfg_;
  drivers::Mempool hdr_pool_, ext_pool_, full_pool_;
  std::unique_ptr<drivers::EthPort> port_;
  std::unique_ptr<std::vector<JobRuntime>> jobs_;
  std::vector<std::unique_ptr<JobSessions>> sessions_;  // of the session jobs (JobRuntime::sessions)
  std::vector<void*> dma_areas_;
  std::vector<std::unique_ptr<GenLcore>> lcores_;
  std::vector<uint16_t> owner_queue_;  // by server lcore: the port queue that serves it, kNotDriven if none
  bool arp_unanswered_ = false;
  bool launched_ = false;
  bool zero_copy_ = false;
};

}  // namespace phub::pktgen
