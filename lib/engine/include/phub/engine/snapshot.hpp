// The immutable view of the data plane the lcores read through one pointer, swapped on reload, and the
// per-job state it points into.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phub/config/config.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/handshake.hpp"

namespace phub::engine {

struct PortInfo {
  std::string name;
  uint16_t port_id = 0;        // ethdev id
  uint32_t ipv4 = 0;           // host order
  uint32_t ipv4_broadcast = 0; // the subnet's broadcast address; 0 for /31 and /32 (no broadcast there)
  MacAddr mac{};
  uint16_t mtu = 1500;
  bool zero_copy_tx = false;   // chained mbufs with external buffers (ports[].tx_copy off and the PMD can)
  bool verify_udp_checksum = true;  // ports[].udp_checksum: check what the PMD did not
  bool tx_udp_checksum_offload = false;  // the PMD fills in the UDP checksum of what is sent (else it stays 0)
  // The port asked its PMD for the receive checksum offloads: only then are a frame's checksum flags its verdict
  // (a PMD without them may pass flags it did not set: net_ring hands over the sender's mbuf as it is).
  bool rx_ipv4_checksum_offload = false;
  bool rx_udp_checksum_offload = false;
};

// The mutable state of one admitted job: what each lcore owns for it (chunks, buffers, rounds, peers,
// counters). It lives as long as some snapshot refers to it, and after that until no transmit still points
// into its result buffers (Engine retires it). A reload that changes the job in place keeps it.
struct JobRuntime {
  uint32_t id = 0;
  std::vector<std::unique_ptr<LcoreJob>> lcores;  // by lcore index
  // Hierarchical jobs: the MAC of each rack's hub, shared by the lcores (see LcoreJob::hub_mac).
  std::unique_ptr<std::atomic<uint64_t>[]> hub_macs;
  uint64_t created_tsc = 0;  // when it was admitted: a peer hub silent since then is unreachable after the deadline

  [[nodiscard]] uint64_t transmits_in_flight() const noexcept;
  [[nodiscard]] uint64_t open_rounds() const noexcept;  // chunks with a round in progress, over the lcores
};

inline uint64_t next_snapshot_generation() noexcept {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

struct Snapshot {
  // Distinct for every snapshot made, never 0: what is cached from one snapshot is keyed by it.
  const uint64_t generation = next_snapshot_generation();
  std::shared_ptr<const config::Config> config;
  std::vector<PortInfo> ports;
  // The jobs, by index: their plans and their state (parallel vectors).
  std::vector<std::shared_ptr<const JobPlan>> jobs;
  std::vector<std::shared_ptr<JobRuntime>> runtimes;
  // lcore_jobs[lcore][job]: runtimes[job]->lcores[lcore], for the lcores' lookups.
  std::vector<std::vector<LcoreJob*>> lcore_jobs;
  // UDP destination port -> job index + 1 (0: no job listens there).
  std::vector<uint16_t> port_to_job = std::vector<uint16_t>(65536, 0);
  // ethdev port id -> index into ports (0xffff: not ours).
  std::array<uint16_t, RTE_MAX_ETHPORTS> port_index{};
  uint64_t round_stall_tsc = 0;
  uint64_t tsc_hz = 0;
  // The server's keys for address cookies and join challenges, drawn once at start (the same in every
  // snapshot): nothing an earlier server run sent opens under them.
  proto::AuthKey cookie_key;
  proto::ChallengeKey challenge_key{};

  // Job index of a configured job id, or -1.
  [[nodiscard]] int job_by_id(uint32_t id) const noexcept {
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i]->cfg.id == id) return static_cast<int>(i);
    }
    return -1;
  }
  [[nodiscard]] int job_by_name(std::string_view name) const noexcept {
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i]->cfg.name == name) return static_cast<int>(i);
    }
    return -1;
  }
};

}  // namespace phub::engine
