// Building the data plane's parts from a config: pools and ports, job plans and their per-lcore state,
// snapshots, steering rules, and the lcores with their rings. Used at start and by reloads.
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <algorithm>

#include "admission.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/engine/budget.hpp"
#include "phub/engine/engine.hpp"
#include "phub/engine/hierarchy.hpp"
#include "phub/engine/tenant_shares.hpp"
#include "phub/engine/tx_buffer.hpp"
#include "lcore.hpp"

namespace phub::engine {

uint64_t JobRuntime::transmits_in_flight() const noexcept {
  uint64_t n = 0;
  for (const auto& lj : lcores) n += lj->transmits_in_flight();
  return n;
}

uint64_t JobRuntime::open_rounds() const noexcept {
  uint64_t n = 0;
  for (const auto& lj : lcores) n += load(lj->open_rounds);
  return n;
}

Expected<std::vector<std::shared_ptr<const JobPlan>>, std::vector<std::string>> plan_jobs(
    const config::Config& cfg, const agg::Kernels& kernels) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  uint16_t mtu = UINT16_MAX;
  for (const auto& p : cfg.ports) mtu = std::min(mtu, p.mtu);
  std::vector<std::shared_ptr<const JobPlan>> plans;
  std::vector<std::string> errors;
  std::vector<uint32_t> port_owner(65536, 0);  // UDP port -> job index + 1
  uint64_t total = 0;
  if (cfg.jobs.size() > cfg.limits.max_jobs) {
    errors.push_back("jobs: " + std::to_string(cfg.jobs.size()) + " jobs, over limits.max_jobs (" +
                     std::to_string(cfg.limits.max_jobs) + ")");
  }
  for (size_t j = 0; j < cfg.jobs.size(); ++j) {
    const config::Job& job = cfg.jobs[j];
    const std::string at = "jobs[" + std::to_string(j + 1) + "]";
    auto plan = plan_job(job, nl, mtu, kernels);
    if (!plan) {
      errors.push_back(at + ": " + plan.error());
      continue;
    }
    if (!cfg.racks.empty()) {
      auto hub = plan_hierarchy(cfg, *plan, mtu);
      if (!hub) {
        errors.push_back(at + ": " + hub.error());
        continue;
      }
      if (auto attached = attach_hierarchy(*plan, std::move(*hub)); !attached) {
        errors.push_back(at + ": " + attached.error());
        continue;
      }
    }
    total += plan->memory.total();
    if (total > cfg.limits.memory_bytes) {
      errors.push_back(at + ": " + job_label(job) + " refused: it needs " + plan->memory.describe() +
                       " and the server's memory limit of " + std::to_string(cfg.limits.memory_bytes) +
                       " bytes (limits.memory_bytes) would be exceeded");
    }
    for (uint16_t i = 0; i < nl; ++i) {
      const uint32_t port = uint32_t{job.port_base} + i;
      if (port > UINT16_MAX) {
        errors.push_back(at + ".port_base: UDP port " + std::to_string(port) + " does not exist");
      } else if (port_owner[port] != 0) {
        errors.push_back(at + ".port_base: UDP port " + std::to_string(port) + " is also " +
                         job_label(cfg.jobs[port_owner[port] - 1]) + "'s");
      } else {
        port_owner[port] = static_cast<uint32_t>(j + 1);
      }
    }
    plans.push_back(std::make_shared<const JobPlan>(std::move(*plan)));
  }
  if (!errors.empty()) return unexpected(std::move(errors));
  return plans;
}

Expected<std::shared_ptr<JobRuntime>, std::string> Engine::make_runtime(const JobPlan& plan,
                                                                      const config::Config& cfg) const {
  auto rt = std::make_shared<JobRuntime>();
  rt->id = plan.cfg.id;
  rt->created_tsc = rte_rdtsc();
  for (uint16_t i = 0; i < cfg.lcores.size(); ++i) {
    auto lj = LcoreJob::create(plan, i, placement_.lcore_socket[i]);
    if (!lj) return unexpected(lj.error());
    rt->lcores.push_back(std::move(*lj));
  }
  if (plan.hub != nullptr) {
    rt->hub_macs = std::make_unique<std::atomic<uint64_t>[]>(plan.hub->hubs.size());
    for (auto& lj : rt->lcores) lj->hub_mac = rt->hub_macs.get();
  }
  return rt;
}

std::vector<PortInfo> Engine::port_infos(const config::Config& cfg) const {
  std::vector<PortInfo> out;
  for (size_t i = 0; i < ports_.size(); ++i) {
    const auto& port = *ports_[i];
    PortInfo pi;
    pi.name = cfg.ports[i].name;
    pi.port_id = port.id();
    pi.ipv4 = cfg.ports[i].ipv4.addr;
    if (cfg.ports[i].ipv4.prefix_len <= 30) pi.ipv4_broadcast = pi.ipv4 | ~ipv4_netmask(cfg.ports[i].ipv4.prefix_len);
    pi.verify_udp_checksum = cfg.ports[i].udp_checksum == config::UdpChecksum::verify;
    pi.mac = port.mac();
    pi.mtu = cfg.ports[i].mtu;
    pi.zero_copy_tx = port.tx_multi_seg() && !cfg.ports[i].tx_copy;
    pi.tx_udp_checksum_offload = port.tx_udp_checksum_offload();
    pi.rx_ipv4_checksum_offload = port.rx_ipv4_checksum_offload();
    pi.rx_udp_checksum_offload = port.rx_udp_checksum_offload();
    out.push_back(pi);
  }
  return out;
}

std::shared_ptr<Snapshot> Engine::build_snapshot(std::shared_ptr<const config::Config> cfg,
                                                 std::vector<std::shared_ptr<const JobPlan>> plans,
                                                 std::vector<std::shared_ptr<JobRuntime>> runtimes) const {
  auto s = std::make_shared<Snapshot>();
  s->config = std::move(cfg);
  s->tsc_hz = rte_get_tsc_hz();
  s->cookie_key = cookie_key_;
  s->challenge_key = challenge_key_;
  s->round_stall_tsc = s->tsc_hz / 1000 * s->config->timeouts.round_stall_ms;
  s->port_index.fill(0xffff);
  s->ports = port_infos(*s->config);
  for (size_t i = 0; i < s->ports.size(); ++i) s->port_index[s->ports[i].port_id] = static_cast<uint16_t>(i);
  const size_t nl = s->config->lcores.size();
  s->lcore_jobs.assign(nl, {});
  for (size_t j = 0; j < plans.size(); ++j) {
    for (uint16_t i = 0; i < nl; ++i) {
      s->port_to_job[plans[j]->cfg.port_base + i] = static_cast<uint16_t>(j + 1);
      s->lcore_jobs[i].push_back(runtimes[j]->lcores[i].get());
    }
  }
  // Each job's share of the hand-off rings and transmit buffers, from the jobs of this snapshot. Kept jobs'
  // LcoreJobs are live: the lcores read the new sizes with relaxed loads.
  uint64_t workers_total = 0;
  for (const auto& plan : plans) workers_total += plan->math.workers;
  const uint32_t ring_slots = handoff_ring_slots(s->config->limits.ring_entries);
  for (size_t j = 0; j < plans.size(); ++j) {
    const uint32_t w = plans[j]->math.workers;
    for (const auto& lj : runtimes[j]->lcores) {
      __atomic_store_n(&lj->handoff_share_slots, job_share_slots(ring_slots, w, workers_total), __ATOMIC_RELAXED);
      __atomic_store_n(&lj->tx_share_packets, tx_guarantee_slots(TxBuffer::kCapacity, w, workers_total), __ATOMIC_RELAXED);
    }
  }
  s->jobs = std::move(plans);
  s->runtimes = std::move(runtimes);
  return s;
}

Expected<void, std::string> Engine::install_steering(const Snapshot& s) {
  const auto& cfg = *s.config;
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  steering_lines_.clear();
  steered_.resize(ports_.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    auto& port = *ports_[p];
    const std::string line = "port " + cfg.ports[p].name + " steering: ";
    if (nl == 1) {
      steering_lines_.push_back(line + "one lcore, nothing to steer");
      continue;
    }
    if (cfg.ports[p].steering == config::Steering::ring) {
      steering_lines_.push_back(line + "ring hand-off (configured)");
      continue;
    }
    // The UDP ports in lcore order; rules change only when the set does.
    std::vector<uint16_t> want;
    for (const auto& plan : s.jobs) {
      for (uint16_t i = 0; i < nl; ++i) want.push_back(static_cast<uint16_t>(plan->cfg.port_base + i));
    }
    if (want == steered_[p] && !want.empty()) continue;
    port.flush_flows();
    steered_[p].clear();
    std::string failure;
    for (size_t k = 0; k < want.size() && failure.empty(); ++k) {
      auto r = port.steer_udp_port(s.ports[p].ipv4, want[k],
                                   queues_.steer_queue(static_cast<uint16_t>(k % nl), static_cast<uint16_t>(p)));
      if (!r) failure = r.error();
    }
    if (failure.empty()) {
      steered_[p] = std::move(want);
      steering_lines_.push_back(line + "rte_flow, " + std::to_string(steered_[p].size()) + " rules");
      continue;
    }
    port.flush_flows();
    if (cfg.ports[p].steering == config::Steering::flow) {
      return unexpected("ports[" + std::to_string(p + 1) + "].steering: \"flow\" needs rte_flow rules, and " +
                        port.name() + " refused them: " + failure);
    }
    steering_lines_.push_back(line + "ring hand-off (" + failure + ")");
  }
  return {};
}

Expected<void, std::string> Engine::build_lcores(const config::Config& cfg) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  auto ring = [&](const std::string& name, uint32_t entries, int socket) -> Expected<rte_ring*, std::string> {
    rte_ring* r = rte_ring_create(name.c_str(), entries, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (r == nullptr) return unexpected("ring " + name + ": " + rte_strerror(rte_errno));
    return r;
  };
  rings_.assign(nl, std::vector<rte_ring*>(nl, nullptr));
  for (uint16_t src = 0; src < nl; ++src) {
    for (uint16_t dst = 0; dst < nl; ++dst) {
      if (src == dst) continue;
      auto r = ring(names_ + "h" + std::to_string(src) + "_" + std::to_string(dst), cfg.limits.ring_entries,
                    placement_.lcore_socket[dst]);
      if (!r) return unexpected(r.error());
      rings_[src][dst] = *r;
    }
  }
  for (uint16_t i = 0; i < nl; ++i) {
    const int socket = placement_.lcore_socket[i];
    auto req = ring(names_ + "req" + std::to_string(i), kRequestRingEntries, socket);
    if (!req) return unexpected(req.error());
    requests_.push_back(*req);
    auto resp = ring(names_ + "resp" + std::to_string(i), kRequestRingEntries, socket);
    if (!resp) return unexpected(resp.error());
    responses_.push_back(*resp);
  }
  const size_t qsbr_bytes = rte_rcu_qsbr_get_memsize(nl);
  qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("phub_qsbr", qsbr_bytes, RTE_CACHE_LINE_SIZE));
  if (qsbr_ == nullptr || rte_rcu_qsbr_init(qsbr_, nl) != 0) return unexpected(std::string("RCU: cannot allocate"));

  std::vector<const drivers::EthPort*> ports;
  for (const auto& p : ports_) ports.push_back(p.get());
  // Without copy pools, copies (state pulls) come from an RX pool: one on the lcore's socket where there is.
  auto rx_pool_near = [&](uint16_t lcore) {
    const auto& sockets = placement_.rx_pool_socket;
    const auto at = std::find(sockets.begin(), sockets.end(), placement_.lcore_socket[lcore]);
    return at == sockets.end() ? 0 : static_cast<size_t>(at - sockets.begin());
  };
  for (uint16_t i = 0; i < nl; ++i) {
    LcoreResources r;
    r.index = i;
    r.lcore_id = cfg.lcores[i].id;
    r.socket = placement_.lcore_socket[i];
    r.rx_queues = queues_.by_lcore[i];
    r.home_ports = interfaces_.home_port;
    r.ports = ports;
    const TxPools& pools = tx_pools_[placement_.tx_pool_set[i]];
    r.hdr_pool = pools.hdr.get();
    r.ext_pool = pools.ext.get();
    r.copy_pool = pools.copy.get() != nullptr ? pools.copy.get() : rx_pools_[rx_pool_near(i)].get();
    for (uint16_t src = 0; src < nl; ++src) {
      if (src != i) r.inbox.push_back(rings_[src][i]);
    }
    r.outbox = rings_[i];
    r.requests = requests_[i];
    r.responses = responses_[i];
    r.snapshot = &published_;
    r.qsbr = qsbr_;
    r.stop = &stop_;
    r.idle_polls_before_sleep = cfg.polling.idle_polls_before_sleep;
    r.idle_sleep_us = cfg.polling.idle_sleep_us;
    try {
      lcores_.push_back(std::unique_ptr<Lcore>(new (placement_.lcore_socket[i]) Lcore(std::move(r))));
    } catch (const std::bad_alloc&) {
      return unexpected("lcore " + std::to_string(cfg.lcores[i].id) + ": no memory for its state on " +
                        config::Placement::socket_name(placement_.lcore_socket[i]));
    }
  }
  return {};
}

}  // namespace phub::engine
