// Generator set-up: pools, port, templates, lcores; start/drain/finish; shutdown.
#include "generator.hpp"

#include <rte_eal.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "phub/base/ipv4.hpp"
#include "phub/drivers/eal.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::pktgen {
namespace {

int lcore_main(void* arg) { return static_cast<GenLcore*>(arg)->run(); }

}  // namespace

Expected<std::unique_ptr<Generator>, std::string> Generator::create(const GenConfig& cfg) {
  std::unique_ptr<Generator> g(new Generator());
  g->cfg_ = cfg;
  const Target& t = cfg.target;
  if (t.jobs.empty()) return unexpected(std::string("no jobs to emulate"));
  const int socket = static_cast<int>(rte_socket_id()) < 0 ? 0 : static_cast<int>(rte_socket_id());
  auto driven = driven_owners(t.owners, t.server_lcores);
  if (!driven) return unexpected(driven.error());
  // The k-th server lcore driven is sent to on TX queue k: on a port that the driven lcores poll, in lcore order,
  // the server's RX queue of that lcore. By default one TX queue per lcore driven and one RX queue per server
  // lcore up to the highest one driven: the server sends what lcore o transmits on its TX queue o of every port,
  // which on memif reaches only a peer with an RX queue o, and a memif peer may have no more TX queues than the
  // server's RX queues there. --queues N: N of each.
  const auto rx_queues = static_cast<uint16_t>(
      cfg.port.queues != 0 ? cfg.port.queues : *std::max_element(driven->begin(), driven->end()) + 1);
  const auto tx_queues = static_cast<uint16_t>(cfg.port.queues != 0 ? cfg.port.queues : driven->size());
  g->owner_queue_.assign(t.server_lcores, kNotDriven);  // the server lcores not driven get no queue
  for (size_t k = 0; k < driven->size(); ++k) g->owner_queue_[(*driven)[k]] = static_cast<uint16_t>(k % tx_queues);

  auto hdr = drivers::Mempool::create("pktgen_hdr", cfg.port.mbufs, RTE_PKTMBUF_HEADROOM + 128, socket);
  if (!hdr) return unexpected(hdr.error());
  g->hdr_pool_ = std::move(*hdr);
  auto ext = drivers::Mempool::create("pktgen_ext", cfg.port.mbufs, 0, socket);
  if (!ext) return unexpected(ext.error());
  g->ext_pool_ = std::move(*ext);
  const auto room = static_cast<uint16_t>(
      std::max<unsigned>(RTE_MBUF_DEFAULT_BUF_SIZE, RTE_PKTMBUF_HEADROOM + t.mtu + proto::kEthBytes + 64));
  auto full = drivers::Mempool::create("pktgen_full", cfg.port.mbufs, room, socket);
  if (!full) return unexpected(full.error());
  g->full_pool_ = std::move(*full);

  drivers::PortSpec spec;
  spec.devargs = cfg.port.devargs;
  spec.rx_queues = rx_queues;
  spec.tx_queues = tx_queues;
  spec.mtu = t.mtu;
  spec.rx_pool = g->full_pool_.get();
  auto port = drivers::EthPort::open(spec);
  if (!port) return unexpected(port.error());
  g->port_ = std::make_unique<drivers::EthPort>(std::move(*port));
  // net_memif puts each segment of a chained frame in its own descriptor, and the peer receives it as
  // chained mbufs that it must linearise (a copy on the server's side, not on testpmd's): on memif every
  // frame is one segment (copied here) unless --tx-chain asks otherwise. Elsewhere pushes chain the
  // payload template (zero copy).
  const bool memif = g->port_->driver() == "net_memif";
  g->zero_copy_ = g->port_->tx_multi_seg() && !cfg.port.tx_copy && (!memif || cfg.port.tx_chain);

  g->jobs_ = std::make_unique<std::vector<JobRuntime>>();
  uint32_t next_ip = cfg.worker_ip != 0 ? cfg.worker_ip : (t.server_ip & 0xffffff00u) + 100;
  for (const auto& tj : t.jobs) {
    auto wl = gen::Workload::build(tj.spec, t.mtu);
    if (!wl) return unexpected(wl.error());
    JobRuntime j{std::move(*wl), {}};
    j.addrs.src_mac = g->port_->mac();
    if (t.server_mac) j.addrs.server_mac = *t.server_mac;
    j.addrs.server_ip = t.server_ip;
    j.addrs.ip_base = first_worker_ip(tj, next_ip, cfg.worker_ip != 0);
    j.addrs.rank_ips = tj.rank_ips;
    next_ip = j.addrs.ip_base + tj.spec.workers;
    if (j.wl.authenticated() && tj.spec.sessions) {
      g->sessions_.push_back(std::make_unique<JobSessions>(tj.spec.workers, tj.spec.server_lcores));
      j.sessions = g->sessions_.back().get();
    }
    g->jobs_->push_back(std::move(j));
  }
  if (g->zero_copy_) {
    if (auto r = g->place_templates(); !r) return unexpected(r.error());
  }

  std::vector<unsigned> ids;
  for (unsigned id = rte_get_next_lcore(-1, 1, 0); id < RTE_MAX_LCORE; id = rte_get_next_lcore(id, 1, 0)) ids.push_back(id);
  if (ids.empty()) return unexpected(std::string("no worker lcores: give the EAL at least two (-l 0-1)"));
  // Generator lcore i transmits on the TX queues q with q % used == i (its own queue i among them), to the
  // server lcores those serve, and polls the RX queues q with q % used == i, handing what is another's to it.
  const size_t used = std::min<size_t>(ids.size(), tx_queues);
  // Lcore 0 stands in for a server lcore not driven: nothing is sent to it, and an answer from it is counted
  // there as unexpected.
  std::vector<uint16_t> owner_lcore(t.server_lcores, 0);
  for (uint16_t o = 0; o < t.server_lcores; ++o) {
    if (g->owner_queue_[o] != kNotDriven) owner_lcore[o] = static_cast<uint16_t>(g->owner_queue_[o] % used);
  }
  for (size_t i = 0; i < used; ++i) {
    LcoreResources r;
    r.index = static_cast<uint16_t>(i);
    r.lcore_id = ids[i];
    r.port = g->port_.get();
    for (uint16_t q = 0; q < rx_queues; ++q) {
      if (q % used == i) r.queues.push_back(q);
    }
    for (uint16_t o = 0; o < t.server_lcores; ++o) {
      if (g->owner_queue_[o] != kNotDriven && owner_lcore[o] == i) r.owners.push_back(o);
    }
    r.port_queues = tx_queues;
    r.owner_queue = g->owner_queue_;
    r.jobs = g->jobs_.get();
    r.hdr_pool = g->hdr_pool_.get();
    r.ext_pool = g->ext_pool_.get();
    r.full_pool = g->full_pool_.get();
    r.zero_copy = g->zero_copy_;
    r.idle_sleep_us = cfg.port.idle_sleep_us;
    if (auto refusal = realtime_polling_refusal(cfg.realtime, r.idle_sleep_us, "--idle-sleep-us",
                                                drivers::lcore_has_cpus_of_its_own(r.lcore_id));
        !refusal.empty()) {
      return unexpected("lcore " + std::to_string(r.lcore_id) + ": " + refusal);
    }
    r.realtime = cfg.realtime;
    r.frame_cache_bytes = cfg.port.frame_cache_mb * (uint64_t{1} << 20) / used;
    r.recycle_depth = cfg.port.recycle_depth;
    g->lcores_.push_back(std::make_unique<GenLcore>(std::move(r)));
    if (!g->lcores_.back()->ok()) return unexpected(std::string("cannot create the hand-off ring"));
  }
  std::vector<GenLcore*> peers;
  for (auto& l : g->lcores_) peers.push_back(l.get());
  for (auto& l : g->lcores_) l->connect(peers, owner_lcore);
  return g;
}

Expected<void, std::string> Generator::place_templates() {
  for (auto& j : *jobs_) {
    for (int which = 0; which < 2; ++which) {
      const auto block = which == 0 ? j.wl.push_block() : j.wl.init_block();
      void* area = rte_malloc_socket("pktgen_tmpl", block.size(), 64, static_cast<int>(port_->socket()));
      if (area == nullptr) return unexpected("cannot place " + std::to_string(block.size()) + " bytes of templates");
      std::memcpy(area, block.data(), block.size());
      dma_areas_.push_back(area);
      const rte_iova_t iova = rte_malloc_virt2iova(area);
      (which == 0 ? j.push_area : j.init_area) = static_cast<const std::byte*>(area);
      (which == 0 ? j.push_iova : j.init_iova) = iova;
      j.iova_contiguous = j.iova_contiguous && rte_eal_iova_mode() == RTE_IOVA_VA;
    }
  }
  return {};
}

void Generator::register_hparams() {
  // Each ps job whose pushes name a hyperparameter set registers it with every server lcore first, on the queue
  // that lcore serves (three times, a millisecond apart: nothing is waited for, the pushes follow).
  for (int copy = 0; copy < 3; ++copy) {
    for (const JobRuntime& j : *jobs_) {
      if (!j.wl.spec().hparams) continue;
      for (uint16_t owner = 0; owner < j.wl.spec().server_lcores; ++owner) {
        if (owner_queue_[owner] == kNotDriven) continue;
        rte_mbuf* m = rte_pktmbuf_alloc(full_pool_.get());
        if (m == nullptr) continue;
        auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, proto::kFrameHeadersBytes + proto::kHparamsBytes));
        const size_t len = p == nullptr ? 0
                                        : gen::write_hparams_frame(j.wl, j.addrs, owner, 0,
                                                                   std::span<std::byte>(p, m->data_len));
        if (len != 0 && j.sessions != nullptr) {  // rank 0's, under its session with that lcore
          WorkerSession& s = j.sessions->at(0, owner);
          proto::seal_session_packet(proto::worker_to_server(s.keys),
                                     std::span<std::byte>(p + proto::kFrameHeadersBytes - proto::kHeaderBytes,
                                                          proto::kHeaderBytes + proto::kHparamsBytes),
                                     s.reply, s.next_seq++, false);
        }
        if (len == 0 || port_->tx(owner_queue_[owner], &m, 1) != 1) rte_pktmbuf_free(m);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Expected<void, std::string> Generator::join_sessions() {
  constexpr double kJoinTimeoutS = 10;  // for all ranks of a job: a few round trips each, 64 at a time
  HandshakePort hp{port_.get(), full_pool_.get(), port_->rx_queues(), owner_queue_};
  const auto driven = static_cast<size_t>(
      std::count_if(owner_queue_.begin(), owner_queue_.end(), [](uint16_t q) { return q != kNotDriven; }));
  for (JobRuntime& j : *jobs_) {
    if (j.sessions == nullptr) continue;
    if (auto r = pktgen::join_sessions(hp, j.wl, j.addrs, *j.sessions, kJoinTimeoutS); !r) return r;
    const uint16_t first = static_cast<uint16_t>(
        std::find_if(owner_queue_.begin(), owner_queue_.end(), [](uint16_t q) { return q != kNotDriven; }) -
        owner_queue_.begin());
    std::fprintf(stderr, "pktgen: job %u: %zu sessions (%u ranks x %zu server lcores)%s\n", j.wl.spec().id,
                 j.wl.spec().workers * driven, j.wl.spec().workers, driven,
                 j.sessions->at(0, first).payload_mac ? ", payload MACs" : "");
  }
  return {};
}

Expected<void, std::string> Generator::launch() {
  if (launched_) return {};
  if (auto r = join_sessions(); !r) return r;  // the epochs the frames carry are known after it
  for (auto& l : lcores_) l->build_caches();  // the server's MAC is known by now
  register_hparams();
  for (size_t j = 0; j < jobs_->size(); ++j) {
    size_t frames = 0;
    for (const auto& l : lcores_) frames += l->cached_frames(j);
    if (frames != 0) {
      std::fprintf(stderr, "pktgen: frame cache: job %u: %zu pre-built frames\n", (*jobs_)[j].wl.spec().id, frames);
    }
  }
  for (auto& l : lcores_) {
    if (int rc = rte_eal_remote_launch(lcore_main, l.get(), l->resources().lcore_id); rc != 0) {
      return unexpected("cannot launch lcore " + std::to_string(l->resources().lcore_id));
    }
  }
  launched_ = true;
  return {};
}

void Generator::post_all(Cmd c, const RunSettings& s) {
  size_t active = 0;
  for (const auto& l : lcores_) {
    for (const auto& p : l->partitions()) {
      if (p->slots().size() != 0) {
        ++active;
        break;
      }
    }
  }
  // The bad packets imitate one job; the lcore that drives its first segments sends them.
  size_t injector = lcores_.size();
  for (size_t i = 0; i < lcores_.size() && injector == lcores_.size(); ++i) {
    for (size_t j = 0; j < jobs_->size(); ++j) {
      const bool target = s.inject_job == 0 ? j == 0 : (*jobs_)[j].wl.spec().id == s.inject_job;
      if (target && lcores_[i]->partitions()[j]->slots().size() != 0) injector = i;
    }
  }
  for (size_t i = 0; i < lcores_.size(); ++i) {
    lcores_[i]->post(c, s, active == 0 ? 0 : s.rate_pps / static_cast<double>(active), i == injector);
  }
}

Expected<void, std::string> Generator::start(const RunSettings& s) {
  if (auto r = launch(); !r) return r;
  post_all(Cmd::start, s);
  return {};
}

void Generator::drain() { post_all(Cmd::drain, RunSettings{}); }
void Generator::finish() { post_all(Cmd::finish, RunSettings{}); }

bool Generator::settled() const {
  for (const auto& l : lcores_) {
    if (!l->settled()) return false;
  }
  return true;
}

bool Generator::rounds_done() const {
  for (const auto& l : lcores_) {
    if (!l->rounds_done()) return false;
  }
  return true;
}

void Generator::shutdown() {
  if (!launched_) return;
  post_all(Cmd::exit, RunSettings{});
  for (auto& l : lcores_) (void)drivers::wait_lcore(l->resources().lcore_id);
  launched_ = false;
}

Generator::~Generator() {
  shutdown();
  port_.reset();  // first: a NIC may still hold references to cached frames and payload templates
  lcores_.clear();
  for (void* a : dma_areas_) rte_free(a);
}

std::vector<std::string> Generator::startup_lines() const {
  std::vector<std::string> out;
  out.push_back(port_->describe() + (zero_copy_ ? ", zero-copy payloads" : ", payloads copied"));
  if (std::find(owner_queue_.begin(), owner_queue_.end(), kNotDriven) != owner_queue_.end()) {
    std::string line = "drives server lcores";
    for (size_t o = 0; o < owner_queue_.size(); ++o) {
      if (owner_queue_[o] != kNotDriven) line += " " + std::to_string(o);
    }
    out.push_back(line + " of 0.." + std::to_string(owner_queue_.size() - 1) + " (--owners)");
  }
  for (const auto& j : *jobs_) {
    out.push_back(gen::describe(j.wl.spec()) + ", " + std::to_string(j.wl.layout().chunk_count()) + " chunks, " +
                  std::to_string(j.wl.segments_total()) + " packets per worker round, workers " +
                  format_ipv4(j.addrs.ip_of(0)) + ".." + format_ipv4(j.addrs.ip_of(j.wl.spec().workers - 1)));
  }
  for (const auto& l : lcores_) {
    std::string line = "lcore " + std::to_string(l->resources().lcore_id) + ": rx queues";
    for (uint16_t q : l->resources().queues) line += " " + std::to_string(q);
    line += "; segments";
    for (const auto& p : l->partitions()) line += " " + std::to_string(p->slots().size());

    out.push_back(line);
  }
  return out;
}

}  // namespace phub::pktgen
