// Engine set-up (pools, ports, admission, steering, rings, RCU, lcores), launch and stop.
#include "phub/engine/engine.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <sys/random.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "admission.hpp"
#include "phub/engine/budget.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/drivers/eal.hpp"
#include "lcore.hpp"

namespace phub::engine {
namespace {

int lcore_main(void* arg) { return static_cast<Lcore*>(arg)->run(); }

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

// How a job's packets are protected, as its start-up line says it (docs/security.md): an operator reading the
// log sees at once a job that runs with insecure = true.
std::string protection(const config::Job& c) {
  if (c.secret.empty()) return ", unauthenticated (insecure = true)";
  if (!c.sessions) return ", authenticated, no sessions (insecure = true: recorded packets replay)";
  return std::string(", authenticated, sessions") + (c.payload_mac ? " with payload MACs" : "") +
         (c.insecure ? " (insecure = true)" : "");
}

}  // namespace

Expected<std::unique_ptr<Engine>, std::string> Engine::create(const config::Config& cfg) {
  std::unique_ptr<Engine> e(new Engine());
  static std::atomic<uint32_t> engines{0};
  if (const uint32_t n = engines.fetch_add(1, std::memory_order_relaxed); n != 0) {
    e->names_ = "phub" + std::to_string(n + 1) + "_";
  }
  e->kernels_ = &agg::select_kernels();
  if (getrandom(&e->cookie_key_, sizeof(e->cookie_key_), 0) != static_cast<ssize_t>(sizeof(e->cookie_key_))) {
    return unexpected(std::string("getrandom: no key for address cookies"));
  }
  e->challenge_key_ = proto::draw_challenge_key();
  if (cfg.lcores.empty()) return unexpected(std::string("config: no lcores"));
  if (cfg.ports.empty()) return unexpected(std::string("config: no ports"));
  for (size_t i = 0; i < cfg.lcores.size(); ++i) {
    const unsigned id = cfg.lcores[i].id;
    if (id >= RTE_MAX_LCORE || !rte_lcore_is_enabled(id)) {
      return unexpected("lcores[" + std::to_string(i + 1) + "].id: lcore " + std::to_string(id) +
                        " is not enabled by the EAL arguments (-l/--lcores)");
    }
    if (id == rte_get_main_lcore()) {
      return unexpected("lcores[" + std::to_string(i + 1) + "].id: lcore " + std::to_string(id) +
                        " is the EAL main lcore, which runs the control thread");
    }
  }
  // Admission first: a job over its quota or the server's memory is refused before any device is touched.
  auto plans = plan_jobs(cfg, *e->kernels_);
  if (!plans) return unexpected(joined(plans.error()));
  if (auto r = e->open_ports(cfg); !r) return unexpected(r.error());
  auto shared_cfg = std::make_shared<const config::Config>(cfg);
  std::vector<std::shared_ptr<JobRuntime>> runtimes;
  for (const auto& plan : *plans) {
    auto rt = e->make_runtime(*plan, cfg);
    if (!rt) return unexpected(rt.error());
    runtimes.push_back(std::move(*rt));
  }
  auto snap = e->build_snapshot(shared_cfg, std::move(*plans), std::move(runtimes));
  if (auto r = e->install_steering(*snap); !r) return unexpected(r.error());
  e->current_ = snap;
  e->published_.store(snap.get());
  if (auto r = e->build_lcores(cfg); !r) return unexpected(r.error());
  if (auto r = e->restore_checkpoints(); !r) return unexpected(r.error());
  return e;
}

Expected<void, std::string> Engine::open_ports(const config::Config& cfg) {
  queues_ = config::queue_map(cfg);
  interfaces_ = config::interface_map(cfg, queues_);
  // Every port is attached before any pool exists: a port's socket is known only once its device is, and
  // its RX pool goes there (SOCKET_ID_ANY, -1, where the bus does not say: config::kAnySocket).
  static_assert(config::kAnySocket == SOCKET_ID_ANY);
  std::vector<int> port_sockets, lcore_sockets;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    auto port = drivers::EthPort::attach(cfg.ports[i].device);
    if (!port) return unexpected("ports[" + std::to_string(i + 1) + "] (" + cfg.ports[i].name + "): " + port.error());
    port_sockets.push_back(port->numa_socket());
    ports_.push_back(std::make_unique<drivers::EthPort>(std::move(*port)));
  }
  for (const auto& l : cfg.lcores) lcore_sockets.push_back(static_cast<int>(rte_lcore_to_socket_id(l.id)));
  auto placed = config::place_memory(cfg, queues_, lcore_sockets, port_sockets);
  if (!placed) return unexpected(placed.error());
  placement_ = std::move(*placed);

  // Every pool's sizes come from the memory budget's plans (budget.hpp), so --check counts what is made.
  auto make = [&](const MbufPoolPlan& plan, const std::string& suffix, int socket) {
    return drivers::Mempool::create(names_ + plan.purpose + suffix, plan.mbufs, plan.data_room_bytes, socket,
                                    plan.cache, plan.priv_bytes);
  };
  bool need_copy = false;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    const auto& pc = cfg.ports[i];
    auto pool = make(rx_pool_plan(cfg, i), "", placement_.rx_pool_socket[i]);
    if (!pool) return unexpected(pool.error());
    drivers::PortSpec spec;
    spec.devargs = pc.device;
    spec.rx_queues = queues_.rx_queues(static_cast<uint16_t>(i));
    spec.tx_queues = queues_.tx_queues;
    spec.rx_desc = pc.rx_desc;
    spec.tx_desc = pc.tx_desc;
    spec.mtu = pc.mtu;
    spec.mac = pc.mac;
    spec.rx_pool = pool->get();
    rx_pools_.push_back(std::move(*pool));
    auto& port = *ports_[i];
    if (auto r = port.start(spec); !r) {
      return unexpected("ports[" + std::to_string(i + 1) + "] (" + pc.name + "): " + r.error());
    }
    need_copy = need_copy || !port.tx_multi_seg() || pc.tx_copy;
  }
  // One set of transmit pools per socket with lcores; the names of a second set on get the socket.
  for (const int socket : placement_.tx_pool_sockets) {
    const std::string suffix =
        placement_.tx_pool_sockets.size() == 1 ? "" : socket < 0 ? "_sany" : "_s" + std::to_string(socket);
    TxPools set;
    auto hdr = make(header_pool_plan(cfg), suffix, socket);
    if (!hdr) return unexpected(hdr.error());
    set.hdr = std::move(*hdr);
    auto ext = make(attach_pool_plan(cfg), suffix, socket);
    if (!ext) return unexpected(ext.error());
    set.ext = std::move(*ext);
    if (need_copy) {
      auto copy = make(copy_pool_plan(cfg), suffix, socket);
      if (!copy) return unexpected(copy.error());
      set.copy = std::move(*copy);
    }
    tx_pools_.push_back(std::move(set));
  }
  return {};
}

Expected<void, std::string> Engine::start(const std::optional<RealtimePolicy>& realtime) {
  if (running_) return {};
  const auto& polling = snapshot().config->polling;
  for (auto& l : lcores_) {
    const unsigned id = l->resources().lcore_id;
    const std::string refusal =
        realtime_polling_refusal(realtime, polling.idle_polls_before_sleep == 0 ? 0 : polling.idle_sleep_us,
                                 "polling.idle_sleep_us", drivers::lcore_has_cpus_of_its_own(id));
    if (!refusal.empty()) return unexpected("lcore " + std::to_string(id) + ": " + refusal);
    l->set_realtime(realtime);
  }
  stop_.store(false);
  for (auto& l : lcores_) {
    const unsigned id = l->resources().lcore_id;
    if (int rc = rte_eal_remote_launch(lcore_main, l.get(), id); rc != 0) {
      stop();
      return unexpected("cannot launch lcore " + std::to_string(id) + ": " + rte_strerror(-rc));
    }
  }
  running_ = true;
  // Started means every lcore runs its loop (under its policy): what READY=1 and "phub: ready" promise.
  const uint64_t give_up = rte_get_timer_cycles() + rte_get_timer_hz() * 10;
  for (auto& l : lcores_) {
    while (!l->looping()) {
      if (rte_get_timer_cycles() > give_up) {
        stop();
        return unexpected("lcore " + std::to_string(l->resources().lcore_id) + " did not start its loop within 10 s");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return {};
}

void Engine::stop() {
  stop_.store(true);
  for (auto& l : lcores_) (void)drivers::wait_lcore(l->resources().lcore_id);
  running_ = false;
}

Engine::~Engine() {
  stop();
  lcores_.clear();
  for (auto& row : rings_) {
    for (rte_ring* r : row) rte_ring_free(r);
  }
  for (rte_ring* r : requests_) rte_ring_free(r);
  for (rte_ring* r : responses_) rte_ring_free(r);
  rte_free(qsbr_);
}

std::vector<std::string> Engine::queue_lines() const {
  const config::Config& cfg = *snapshot().config;
  std::vector<std::string> out;
  for (uint16_t p = 0; p < queues_.rx_owner.size(); ++p) out.push_back(queues_.describe_port(cfg, p));
  return out;
}

std::string Engine::interface_line(const config::Config& cfg, const JobPlan& plan) const {
  // This server's lcores are owners shard_index * lcores .. of the job's layout.
  std::vector<uint64_t> per_lcore;
  for (uint16_t i = 0; i < plan.lcores; ++i) {
    per_lcore.push_back(plan.layout.owner_elems(static_cast<uint16_t>(plan.first_owner + i)));
  }
  const auto per_port = interfaces_.per_port(per_lcore, cfg.ports.size());
  std::string s = "chunk map: " + interfaces_.describe(cfg) + "; elems per port";
  for (size_t p = 0; p < per_port.size(); ++p) s += " " + cfg.ports[p].name + " " + std::to_string(per_port[p]);
  return s;
}

std::vector<std::string> Engine::startup_lines() const {
  std::vector<std::string> out;
  const Snapshot& s = snapshot();
  out.push_back(agg::describe_selection());
  for (size_t p = 0; p < ports_.size(); ++p) {
    // What the PMD does not check of a UDP checksum ("rx-udp-cksum sw") is checked here unless trusted.
    const bool trusted = !s.ports[p].verify_udp_checksum && !ports_[p]->rx_udp_checksum_offload();
    out.push_back(ports_[p]->describe() + (trusted ? " (udp_checksum trust: not checked)" : "") + ", ipv4 " +
                  format_ipv4(s.ports[p].ipv4));
  }
  for (const auto& l : queue_lines()) out.push_back(l);
  for (const auto& l : placement_.describe(*s.config)) out.push_back(l);
  for (const auto& l : steering_lines_) out.push_back(l);
  for (const auto& plan : s.jobs) {
    const auto& c = plan->cfg;
    out.push_back("job '" + c.name + "' (id " + std::to_string(c.id) + "): " +
                  (plan->math.ps ? "ps" : "allreduce") + (plan->math.deterministic ? " deterministic" : "") + ", " +
                  std::to_string(c.workers) + " workers, " + std::string(dtype_name(c.dtype)) + ", " +
                  std::to_string(plan->layout.total_elems()) + " elems in " +
                  std::to_string(plan->layout.chunk_count()) + " chunks, " +
                  std::to_string(plan->math.segment_elems) + " elems/packet, udp " + std::to_string(c.port_base) +
                  ".." + std::to_string(c.port_base + plan->lcores - 1) + ", memory " + plan->memory.describe() +
                  protection(c));
    if (c.interface_map) out.push_back("job '" + c.name + "' " + interface_line(*s.config, *plan));
  }
  for (const auto& l : lcores_) out.push_back(l->describe(s));
  for (const auto& l : restore_lines_) out.push_back(l);
  return out;
}

}  // namespace phub::engine
