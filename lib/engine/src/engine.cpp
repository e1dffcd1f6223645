// Engine set-up (pools, ports, admission, steering, rings, RCU, lcores), launch, stop and counters.
#include "phub/engine/engine.hpp"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace phub::engine {
namespace {

int lcore_main(void* arg) { return static_cast<Lcore*>(arg)->run(); }

std::string ipv4_text(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." + std::to_string((a >> 8) & 0xff) +
         "." + std::to_string(a & 0xff);
}

}  // namespace

Expected<std::unique_ptr<Engine>, std::string> Engine::create(const config::Config& cfg) {
  std::unique_ptr<Engine> e(new Engine());
  e->kernels_ = &agg::select_kernels();
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
  auto snap = std::make_unique<Snapshot>();
  if (auto r = e->plan_jobs(*snap, cfg); !r) return unexpected(r.error());
  if (auto r = e->open_ports(cfg); !r) return unexpected(r.error());
  if (auto r = e->allocate_jobs(*snap, cfg); !r) return unexpected(r.error());
  snap->config = std::make_shared<const config::Config>(cfg);
  snap->tsc_hz = rte_get_tsc_hz();
  snap->round_stall_tsc = snap->tsc_hz / 1000 * cfg.timeouts.round_stall_ms;
  snap->port_index.fill(0xffff);
  const bool force_copy = std::getenv("PHUB_TX_COPY") != nullptr;
  for (size_t i = 0; i < e->ports_.size(); ++i) {
    const auto& port = *e->ports_[i];
    PortInfo pi;
    pi.name = cfg.ports[i].name;
    pi.port_id = port.id();
    pi.ipv4 = cfg.ports[i].ipv4.addr;
    pi.mac = port.mac();
    pi.mtu = cfg.ports[i].mtu;
    pi.zero_copy_tx = port.tx_multi_seg() && !force_copy;
    snap->port_index[port.id()] = static_cast<uint16_t>(i);
    snap->ports.push_back(pi);
  }
  e->install_steering(cfg, *snap);
  e->owned_snapshot_ = std::move(snap);
  e->snapshot_.store(e->owned_snapshot_.get());
  if (auto r = e->build_lcores(cfg); !r) return unexpected(r.error());
  return e;
}

// Received frames start 32 bytes into a cache line (mbufs are line-aligned; 128-byte mbuf, this much
// private area, 128-byte headroom), so that the payload of a plain phub frame, 96 bytes in, starts on a
// line: no vector load of a push straddles two lines.
constexpr uint16_t kRxPrivBytes = 32;

Expected<void, std::string> Engine::open_ports(const config::Config& cfg) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  const int socket = static_cast<int>(rte_socket_id()) < 0 ? 0 : static_cast<int>(rte_socket_id());
  const uint32_t mbufs = cfg.limits.mbufs;
  auto hdr = drivers::Mempool::create("phub_hdr", mbufs, RTE_PKTMBUF_HEADROOM + 128, socket);
  if (!hdr) return unexpected(hdr.error());
  hdr_pool_ = std::move(*hdr);
  auto ext = drivers::Mempool::create("phub_ext", mbufs, 0, socket);
  if (!ext) return unexpected(ext.error());
  ext_pool_ = std::move(*ext);

  uint16_t max_mtu = 0;
  for (const auto& p : cfg.ports) max_mtu = std::max(max_mtu, p.mtu);
  // Jumbo MTUs get 1 KiB of slack over the frame, so that PMDs with their own frame slots (af_packet's
  // framesz) fit whatever a frame-sized slot rounds up to.
  const unsigned frame = max_mtu + proto::kEthBytes + proto::kVlanBytes;
  const auto room = static_cast<uint16_t>(max_mtu <= 1500 ? RTE_MBUF_DEFAULT_BUF_SIZE
                                                          : RTE_PKTMBUF_HEADROOM + (frame + 1023) / 1024 * 1024 + 1024);
  bool need_copy = false;
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    const auto& pc = cfg.ports[i];
    auto pool = drivers::Mempool::create("phub_rx" + std::to_string(i), mbufs, room, socket, 256, kRxPrivBytes);
    if (!pool) return unexpected(pool.error());
    drivers::PortSpec spec;
    spec.devargs = pc.device;
    spec.queues = nl;
    spec.rx_desc = pc.rx_desc;
    spec.tx_desc = pc.tx_desc;
    spec.mtu = pc.mtu;
    spec.mac = pc.mac;
    spec.rx_pool = pool->get();
    rx_pools_.push_back(std::move(*pool));
    auto port = drivers::EthPort::open(spec);
    if (!port) return unexpected("ports[" + std::to_string(i + 1) + "] (" + pc.name + "): " + port.error());
    need_copy = need_copy || !port->tx_multi_seg() || std::getenv("PHUB_TX_COPY") != nullptr;
    ports_.push_back(std::make_unique<drivers::EthPort>(std::move(*port)));
  }
  if (need_copy) {
    auto copy = drivers::Mempool::create("phub_copy", mbufs, room, socket);
    if (!copy) return unexpected(copy.error());
    copy_pool_ = std::move(*copy);
  }
  return {};
}

Expected<void, std::string> Engine::plan_jobs(Snapshot& s, const config::Config& cfg) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  uint16_t mtu = UINT16_MAX;
  for (const auto& p : cfg.ports) mtu = std::min(mtu, p.mtu);
  uint64_t total = 0;
  for (size_t j = 0; j < cfg.jobs.size(); ++j) {
    auto plan = plan_job(cfg.jobs[j], nl, mtu, *kernels_);
    if (!plan) return unexpected(plan.error());
    plan->index = static_cast<uint32_t>(j);
    total += plan->memory.total();
    if (total > cfg.limits.memory_bytes) {
      return unexpected("job '" + cfg.jobs[j].name + "' (id " + std::to_string(cfg.jobs[j].id) +
                        ") refused: it needs " + plan->memory.describe() + " and the server's memory limit of " +
                        std::to_string(cfg.limits.memory_bytes) + " bytes (limits.memory_bytes) would be exceeded");
    }
    for (uint16_t i = 0; i < nl; ++i) {
      const uint32_t port = cfg.jobs[j].port_base + i;
      if (port > UINT16_MAX || s.port_to_job[port] != 0) {
        return unexpected("job '" + cfg.jobs[j].name + "': UDP port " + std::to_string(port) + " is not available");
      }
      s.port_to_job[port] = static_cast<uint16_t>(j + 1);
    }
    s.jobs.push_back(std::make_shared<const JobPlan>(std::move(*plan)));
  }
  return {};
}

Expected<void, std::string> Engine::allocate_jobs(Snapshot& s, const config::Config& cfg) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  lcore_jobs_.clear();
  lcore_jobs_.resize(nl);
  s.lcore_jobs.assign(nl, {});
  for (const auto& plan : s.jobs) {
    for (uint16_t i = 0; i < nl; ++i) {
      const int socket = static_cast<int>(rte_lcore_to_socket_id(cfg.lcores[i].id));
      auto lj = LcoreJob::create(*plan, i, socket);
      if (!lj) return unexpected(lj.error());
      s.lcore_jobs[i].push_back(lj->get());
      lcore_jobs_[i].push_back(std::move(*lj));
    }
  }
  return {};
}

void Engine::install_steering(const config::Config& cfg, const Snapshot& s) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  for (size_t p = 0; p < ports_.size(); ++p) {
    auto& port = *ports_[p];
    std::string line = "port " + cfg.ports[p].name + " steering: ";
    if (nl == 1) {
      steering_lines_.push_back(line + "one lcore, nothing to steer");
      continue;
    }
    if (cfg.ports[p].steering == config::Steering::ring) {
      steering_lines_.push_back(line + "ring hand-off (configured)");
      continue;
    }
    std::string failure;
    unsigned rules = 0;
    for (const auto& plan : s.jobs) {
      for (uint16_t i = 0; i < nl && failure.empty(); ++i) {
        auto r = port.steer_udp_port(s.ports[p].ipv4, static_cast<uint16_t>(plan->cfg.port_base + i), i);
        if (r) {
          ++rules;
        } else {
          failure = r.error();
        }
      }
    }
    if (failure.empty()) {
      steering_lines_.push_back(line + "rte_flow, " + std::to_string(rules) + " rules");
    } else {
      port.flush_flows();
      steering_lines_.push_back(line + "ring hand-off (" + failure + ")");
    }
  }
}

Expected<void, std::string> Engine::build_lcores(const config::Config& cfg) {
  const auto nl = static_cast<uint16_t>(cfg.lcores.size());
  rings_.assign(nl, std::vector<rte_ring*>(nl, nullptr));
  for (uint16_t src = 0; src < nl; ++src) {
    for (uint16_t dst = 0; dst < nl; ++dst) {
      if (src == dst) continue;
      const std::string name = "phub_h" + std::to_string(src) + "_" + std::to_string(dst);
      rings_[src][dst] = rte_ring_create(name.c_str(), cfg.limits.ring_entries,
                                         static_cast<int>(rte_lcore_to_socket_id(cfg.lcores[dst].id)),
                                         RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (rings_[src][dst] == nullptr) return unexpected("hand-off ring " + name + ": " + rte_strerror(rte_errno));
    }
  }
  const size_t qsbr_bytes = rte_rcu_qsbr_get_memsize(nl);
  qsbr_ = static_cast<rte_rcu_qsbr*>(rte_zmalloc("phub_qsbr", qsbr_bytes, RTE_CACHE_LINE_SIZE));
  if (qsbr_ == nullptr || rte_rcu_qsbr_init(qsbr_, nl) != 0) return unexpected(std::string("RCU: cannot allocate"));

  std::vector<const drivers::EthPort*> ports;
  for (const auto& p : ports_) ports.push_back(p.get());
  for (uint16_t i = 0; i < nl; ++i) {
    LcoreResources r;
    r.index = i;
    r.lcore_id = cfg.lcores[i].id;
    for (uint16_t p = 0; p < cfg.ports.size(); ++p) {
      const auto& names = cfg.lcores[i].ports;
      if (names.empty() || std::find(names.begin(), names.end(), cfg.ports[p].name) != names.end()) {
        r.rx_ports.push_back(p);
      }
    }
    r.ports = ports;
    r.hdr_pool = hdr_pool_.get();
    r.ext_pool = ext_pool_.get();
    r.copy_pool = copy_pool_.get() != nullptr ? copy_pool_.get() : rx_pools_[0].get();
    for (uint16_t src = 0; src < nl; ++src) {
      if (src != i) r.inbox.push_back(rings_[src][i]);
    }
    r.outbox = rings_[i];
    r.snapshot = &snapshot_;
    r.qsbr = qsbr_;
    r.stop = &stop_;
    r.idle_polls_before_sleep = cfg.polling.idle_polls_before_sleep;
    r.idle_sleep_us = cfg.polling.idle_sleep_us;
    lcores_.push_back(std::make_unique<Lcore>(std::move(r)));
  }
  return {};
}

Expected<void, std::string> Engine::start() {
  if (running_) return {};
  stop_.store(false);
  for (auto& l : lcores_) {
    const unsigned id = l->resources().lcore_id;
    if (int rc = rte_eal_remote_launch(lcore_main, l.get(), id); rc != 0) {
      stop();
      return unexpected("cannot launch lcore " + std::to_string(id) + ": " + rte_strerror(-rc));
    }
  }
  running_ = true;
  return {};
}

void Engine::stop() {
  stop_.store(true);
  for (auto& l : lcores_) (void)rte_eal_wait_lcore(l->resources().lcore_id);
  running_ = false;
}

Engine::~Engine() {
  stop();
  lcores_.clear();
  for (auto& row : rings_) {
    for (rte_ring* r : row) rte_ring_free(r);
  }
  rte_free(qsbr_);
}

std::vector<std::string> Engine::startup_lines() const {
  std::vector<std::string> out;
  const Snapshot& s = snapshot();
  out.push_back(agg::describe_selection());
  for (size_t p = 0; p < ports_.size(); ++p) {
    out.push_back(ports_[p]->describe() + ", ipv4 " + ipv4_text(s.ports[p].ipv4));
  }
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
                  (plan->authenticated ? ", authenticated" : ""));
  }
  for (const auto& l : lcores_) out.push_back(l->describe(s));
  return out;
}

Totals Engine::totals() const {
  Totals t;
  t.jobs.resize(snapshot().jobs.size());
  for (const auto& l : lcores_) {
    const LcoreCounters& c = l->counters();
    t.lcores.rx_packets += c.rx_packets;
    t.lcores.rx_bytes += c.rx_bytes;
    t.lcores.tx_packets += c.tx_packets;
    t.lcores.tx_bytes += c.tx_bytes;
    t.lcores.arp_replies += c.arp_replies;
    t.lcores.icmp_replies += c.icmp_replies;
    t.lcores.redirected_out += c.redirected_out;
    t.lcores.redirected_in += c.redirected_in;
    t.lcores.results_copied += c.results_copied;
    t.lcores.idle_sleeps += c.idle_sleeps;
    t.lcores.loops += c.loops;
    t.lcores.busy_loops += c.busy_loops;
    t.lcores.busy_tsc += c.busy_tsc;
    t.lcores.total_tsc += c.total_tsc;
    for (size_t d = 0; d < kDropCount; ++d) t.lcores.drops[d] += c.drops[d];
    for (size_t d = 0; d < proto::kParseErrorCount; ++d) t.lcores.malformed[d] += c.malformed[d];
  }
  for (const auto& row : lcore_jobs_) {
    for (size_t j = 0; j < row.size(); ++j) {
      const JobCounters& c = row[j]->counters;
      JobCounters& o = t.jobs[j];
      o.pushes += c.pushes;
      o.push_payload_bytes += c.push_payload_bytes;
      o.duplicates += c.duplicates;
      o.retransmits_seen += c.retransmits_seen;
      o.segments_completed += c.segments_completed;
      o.rounds_completed += c.rounds_completed;
      o.results_sent += c.results_sent;
      o.results_resent += c.results_resent;
      o.rerequests += c.rerequests;
      o.errors_sent += c.errors_sent;
      o.stalls_reported += c.stalls_reported;
      o.results_reused_busy += c.results_reused_busy;
      o.inits += c.inits;
      o.pulls += c.pulls;
      o.joins += c.joins;
      o.epochs_started += c.epochs_started;
      o.leaves += c.leaves;
    }
  }
  return t;
}

std::string Engine::format_counters() const {
  const Totals t = totals();
  const Snapshot& s = snapshot();
  std::ostringstream o;
  for (const auto& l : lcores_) {
    const LcoreCounters& c = l->counters();
    o << "lcore " << l->resources().lcore_id << ": rx_packets " << c.rx_packets << " rx_bytes " << c.rx_bytes
      << " tx_packets " << c.tx_packets << " tx_bytes " << c.tx_bytes << " redirected_out " << c.redirected_out
      << " redirected_in " << c.redirected_in << " arp_replies " << c.arp_replies << " icmp_replies "
      << c.icmp_replies << " results_copied " << c.results_copied << " idle_sleeps " << c.idle_sleeps
      << " loops " << c.loops << " busy_loops " << c.busy_loops << " busy_cycles " << c.busy_tsc
      << " busy_percent " << (c.total_tsc ? 100 * c.busy_tsc / c.total_tsc : 0) << "\n";
  }
  for (size_t j = 0; j < t.jobs.size(); ++j) {
    const JobCounters& c = t.jobs[j];
    o << "job " << s.jobs[j]->cfg.name << ": pushes " << c.pushes << " push_payload_bytes " << c.push_payload_bytes
      << " segments_completed " << c.segments_completed << " rounds_completed " << c.rounds_completed
      << " results_sent " << c.results_sent << " results_resent " << c.results_resent << " duplicates "
      << c.duplicates << " retransmits_seen " << c.retransmits_seen << " rerequests " << c.rerequests << " inits "
      << c.inits << " pulls " << c.pulls << " errors_sent " << c.errors_sent << " stalls_reported "
      << c.stalls_reported << " results_reused_busy " << c.results_reused_busy << " joins " << c.joins << " epochs_started "
      << c.epochs_started << "\n";
  }
  o << "drops:";
  bool any = false;
  for (size_t d = 0; d < kDropCount; ++d) {
    if (t.lcores.drops[d] == 0) continue;
    o << " " << drop_name(static_cast<Drop>(d)) << " " << t.lcores.drops[d];
    any = true;
  }
  for (size_t d = 0; d < proto::kParseErrorCount; ++d) {
    if (t.lcores.malformed[d] == 0) continue;
    o << " malformed_" << proto::parse_error_name(static_cast<proto::ParseError>(d)) << " " << t.lcores.malformed[d];
    any = true;
  }
  o << (any ? "\n" : " none\n");
  for (size_t p = 0; p < ports_.size(); ++p) {
    const auto st = ports_[p]->stats();
    o << "port " << s.ports[p].name << ": rx_packets " << st.rx_packets << " rx_missed " << st.rx_missed
      << " rx_nombuf " << st.rx_nombuf << " rx_errors " << st.rx_errors << " tx_packets " << st.tx_packets
      << " tx_errors " << st.tx_errors << "\n";
  }
  return o.str();
}

unsigned Engine::transmit_mbufs_in_use() const {
  unsigned n = 0;
  for (const auto* pool : {&hdr_pool_, &ext_pool_, &copy_pool_}) {
    if (pool->get() != nullptr) n += rte_mempool_in_use_count(pool->get());
  }
  return n;
}

uint64_t Engine::job_allocated_bytes(size_t job_index) const {
  uint64_t total = 0;
  for (const auto& row : lcore_jobs_) total += row[job_index]->allocated_bytes;
  return total;
}

}  // namespace phub::engine
