// The memory budget: the engine's allocations from the EAL's memory, as arithmetic over the config.
#include "phub/engine/budget.hpp"

#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <set>

#include "admission.hpp"
#include "phub/base/eal_args.hpp"
#include "phub/agg/kernels.hpp"
#include "phub/config/queue_map.hpp"
#include "lcore.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/engine/memory.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {
namespace {

// Received frames start 32 bytes into a cache line (mbufs are line-aligned; 128-byte mbuf, this much
// private area, 128-byte headroom), so that the payload of a plain phub frame, 96 bytes in, starts on a
// line: no vector load of a push straddles two lines.
constexpr uint16_t kRxPrivBytes = 32;
constexpr unsigned kRxCache = 256;
constexpr unsigned kDefaultCache = 256;
// The EAL's and the PMDs' own allocations from the same heap: tests/dpdk/engine/memory_test.cpp measures
// 0.15 MiB after rte_eal_init with --no-huge; a real NIC's PMD keeps its tables there too, which this
// machine cannot measure. An allowance, not a measurement.
constexpr uint64_t kEalBytes = 16ull << 20;
// Descriptor rings per descriptor: the NIC's ring entry (16 to 32 B) and the PMD's software ring (8 to
// 16 B), rounded up for the PMDs that keep more per slot.
constexpr uint64_t kBytesPerDescriptor = 64;
// Pages the mempools lay objects out in: without hugepages the system's 4 KiB pages; with them, 2 MiB, the
// smallest x86 hugepage (1 GiB pages lose less to the objects that do not fill a page).
constexpr uint64_t kSmallPageBytes = 4096;
constexpr uint64_t kHugepageBytes = 2ull << 20;

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// A ring made with rte_ring_create(entries), `entries` a power of two (limits.ring_entries is): that many slots.
uint64_t ring_bytes(uint32_t entries) { return static_cast<uint64_t>(rte_ring_get_memsize(entries)); }

// A mempool's ring of `objects`: the ring driver makes it with the next power of two above the count.
uint64_t mempool_ring_bytes(uint32_t objects) {
  return ring_bytes(static_cast<uint32_t>(rte_align32pow2(objects + 1)));
}

// The most MiB one size may name: 1 EiB, far above any machine, and far enough below 2^64 bytes that sums of
// a few sockets' sizes and the budget cannot wrap.
constexpr uint64_t kMaxMib = 1ull << 40;

// "512" -> 512 (MiB); nullopt for anything that is not a whole number of MiB up to kMaxMib.
std::optional<uint64_t> whole_mib(std::string_view text) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty() || v > kMaxMib) return std::nullopt;
  return v;
}

}  // namespace

MbufPoolPlan header_pool_plan(const config::Config& cfg) {
  return {"hdr", cfg.limits.mbufs, static_cast<uint16_t>(RTE_PKTMBUF_HEADROOM + 128), 0, kDefaultCache};
}

MbufPoolPlan attach_pool_plan(const config::Config& cfg) { return {"ext", cfg.limits.mbufs, 0, 0, kDefaultCache}; }

MbufPoolPlan rx_pool_plan(const config::Config& cfg, size_t port) {
  uint16_t max_mtu = 0;
  for (const auto& p : cfg.ports) max_mtu = std::max(max_mtu, p.mtu);
  // Jumbo MTUs get 1 KiB of slack over the frame, so that PMDs with their own frame slots (af_packet's
  // framesz) fit whatever a frame-sized slot rounds up to.
  const unsigned frame = max_mtu + proto::kEthBytes + proto::kVlanBytes;
  const auto room = static_cast<uint16_t>(max_mtu <= 1500 ? RTE_MBUF_DEFAULT_BUF_SIZE
                                                          : RTE_PKTMBUF_HEADROOM + (frame + 1023) / 1024 * 1024 + 1024);
  return {"rx" + std::to_string(port), cfg.limits.mbufs, room, kRxPrivBytes, kRxCache};
}

MbufPoolPlan copy_pool_plan(const config::Config& cfg) {
  MbufPoolPlan p = rx_pool_plan(cfg, 0);
  p.purpose = "copy";
  p.priv_bytes = 0;
  p.cache = kDefaultCache;
  return p;
}

uint64_t mbuf_pool_bytes(const MbufPoolPlan& plan, uint64_t page_bytes) {
  rte_mempool_objsz sz{};
  const uint32_t elt = static_cast<uint32_t>(sizeof(rte_mbuf)) + plan.priv_bytes + plan.data_room_bytes;
  rte_mempool_calc_obj_size(elt, 0, &sz);
  const uint64_t obj = sz.total_size, n = plan.mbufs;
  // A packet mempool keeps each object within one page (its buffer must be contiguous for the NIC): a page
  // holds floor(page / object) objects and the rest of it is lost; an object larger than a page takes whole
  // pages of its own. On 2 MiB pages the loss is a fraction of a percent; on the 4 KiB pages of --no-huge,
  // a 2.3 KiB mbuf takes a page.
  uint64_t objects = obj * n;
  if (page_bytes != 0) {
    const uint64_t per_page = page_bytes / obj;
    objects = per_page == 0 ? (obj + page_bytes - 1) / page_bytes * page_bytes * n
                            : (n / per_page) * page_bytes + (n % per_page) * obj;
  }
  const unsigned cache = std::min<unsigned>({plan.cache, RTE_MEMPOOL_CACHE_MAX_SIZE, plan.mbufs / 2});
  const uint64_t header = sizeof(rte_mempool) + sizeof(rte_pktmbuf_pool_private) +
                          (cache != 0 ? RTE_MAX_LCORE * sizeof(rte_mempool_cache) : 0);
  return objects + mempool_ring_bytes(plan.mbufs) + header;
}

uint64_t MemoryBudget::total_bytes() const noexcept {
  uint64_t t = 0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

std::string MemoryBudget::describe() const {
  std::string out = mib(total_bytes()) + ":";
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? " " : ", ") + items[i].what + " " + mib(items[i].bytes);
  return out;
}

uint64_t MemoryBudget::Socket::total_bytes() const noexcept {
  uint64_t t = 0;
  for (const auto& i : items) t += i.bytes;
  return t;
}

std::string MemoryBudget::Socket::describe() const {
  std::string out = config::Placement::socket_name(socket) + " needs " + mib(total_bytes()) + ":";
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? " " : ", ") + items[i].what + " " + mib(items[i].bytes);
  return out;
}

Expected<MemoryBudget, std::string> memory_budget(const config::Config& cfg, const config::Placement& placement,
                                                  uint64_t page_bytes) {
  const size_t nl = cfg.lcores.size(), np = cfg.ports.size();
  if (placement.lcore_socket.size() != nl || placement.rx_pool_socket.size() != np ||
      placement.tx_pool_set.size() != nl) {
    return unexpected("memory budget: a placement of " + std::to_string(placement.lcore_socket.size()) +
                      " lcores and " + std::to_string(placement.rx_pool_socket.size()) + " ports for a config of " +
                      std::to_string(nl) + " lcores and " + std::to_string(np) + " ports");
  }
  auto plans = plan_jobs(cfg, agg::select_kernels());
  if (!plans) {
    std::string all;
    for (const auto& e : plans.error()) all += (all.empty() ? "" : "; ") + e;
    return unexpected(all);
  }
  // Every allocation with the socket the placement gives it, by kind; `label` names it in its socket's item.
  enum Kind : size_t { kPools, kDescriptors, kRings, kLcoreState, kJobState, kEal, kKinds };
  static constexpr const char* kKindName[kKinds] = {"mbuf pools",  "descriptor rings", "hand-off and request rings",
                                                    "lcore state", "job state",        "EAL"};
  struct Share {
    int socket;
    Kind kind;
    std::string label;
    uint64_t bytes;
  };
  std::vector<Share> shares;

  size_t pools = 0;
  for (size_t p = 0; p < np; ++p, ++pools) {
    shares.push_back({placement.rx_pool_socket[p], kPools, "rx " + cfg.ports[p].name,
                      mbuf_pool_bytes(rx_pool_plan(cfg, p), page_bytes)});
  }
  const uint64_t transmit_set = mbuf_pool_bytes(header_pool_plan(cfg), page_bytes) +
                                mbuf_pool_bytes(attach_pool_plan(cfg), page_bytes) +
                                mbuf_pool_bytes(copy_pool_plan(cfg), page_bytes);
  for (const int socket : placement.tx_pool_sockets) {
    shares.push_back({socket, kPools, "transmit set", transmit_set});
    pools += 3;
  }

  // A port's descriptor rings are on its socket, or where that is unknown on its RX pool's (EthPort::start).
  const config::QueueMap queues = config::queue_map(cfg);
  for (size_t p = 0; p < np; ++p) {
    const uint64_t descriptors =
        static_cast<uint64_t>(cfg.ports[p].rx_desc) * queues.rx_queues(static_cast<uint16_t>(p)) +
        static_cast<uint64_t>(cfg.ports[p].tx_desc) * queues.tx_queues;
    shares.push_back({placement.rx_pool_socket[p], kDescriptors, cfg.ports[p].name, descriptors * kBytesPerDescriptor});
  }

  // Each lcore's inbound hand-off rings (one from each other lcore) and its request and response rings are on
  // its socket; the RCU state the lcores share is wherever the control thread's malloc puts it.
  const auto nl64 = static_cast<uint64_t>(nl);
  for (size_t i = 0; i < nl; ++i) {
    shares.push_back({placement.lcore_socket[i], kRings, "",
                      (nl64 - 1) * ring_bytes(cfg.limits.ring_entries) + 2 * ring_bytes(kRequestRingEntries)});
  }
  shares.push_back({config::kAnySocket, kRings, "RCU state", rte_rcu_qsbr_get_memsize(static_cast<uint32_t>(nl))});

  // Each lcore's own object with its per-port transmit buffers and answer buckets, and its object per job
  // (OnSocket: DPDK memory on the lcore's socket), each with the heap's element header; and the job state
  // it owns (its chunks' share of each job's formula: estimate_job_memory over its owner alone).
  constexpr uint64_t kHeapHeaderBytes = 128;
  const uint64_t per_lcore = Lcore::object_bytes(np) + 3 * kHeapHeaderBytes;
  for (size_t i = 0; i < nl; ++i) {
    const int socket = placement.lcore_socket[i];
    shares.push_back({socket, kLcoreState, "lcore " + std::to_string(cfg.lcores[i].id),
                      per_lcore + plans->size() * (sizeof(LcoreJob) + kHeapHeaderBytes)});
    uint64_t jobs = 0;
    for (const auto& plan : *plans) {
      jobs += estimate_job_memory(plan->math, plan->layout, static_cast<uint16_t>(plan->first_owner + i), 1)
                  .data_plane();
    }
    shares.push_back({socket, kJobState, "", jobs});
  }
  shares.push_back({config::kAnySocket, kEal, "", kEalBytes});

  MemoryBudget b;
  std::vector<uint64_t> by_kind(kKinds, 0);
  for (const auto& s : shares) by_kind[s.kind] += s.bytes;
  b.items.push_back({std::string(kKindName[kPools]) + " (" + std::to_string(pools) + " of " +
                         std::to_string(cfg.limits.mbufs) + " mbufs, the copy pool counted)",
                     by_kind[kPools]});
  for (size_t k = kDescriptors; k < kKinds; ++k) {
    b.items.push_back({k == kJobState ? "job state (" + std::to_string(plans->size()) + " jobs)" : kKindName[k],
                       by_kind[k]});
  }
  std::set<int> known;
  bool anywhere = false;
  for (const auto& s : shares) {
    if (s.socket == config::kAnySocket) {
      anywhere = true;
    } else {
      known.insert(s.socket);
    }
  }
  std::vector<int> sockets(known.begin(), known.end());
  if (anywhere) sockets.push_back(config::kAnySocket);
  for (const int socket : sockets) {
    MemoryBudget::Socket on{socket, {}};
    for (size_t k = 0; k < kKinds; ++k) {
      uint64_t bytes = 0;
      std::string labels;
      bool any = false;
      for (const auto& s : shares) {
        if (s.socket != socket || s.kind != k) continue;
        any = true;
        bytes += s.bytes;
        if (!s.label.empty()) labels += (labels.empty() ? "" : ", ") + s.label;
      }
      if (any) on.items.push_back({kKindName[k] + (labels.empty() ? std::string() : " (" + labels + ")"), bytes});
    }
    b.sockets.push_back(std::move(on));
  }
  return b;
}

Expected<Reservation, std::string> reservation_from_eal_args(const std::vector<std::string>& eal_args,
                                                             const FreeHugepages& free) {
  constexpr uint64_t kMiB = 1ull << 20;
  const bool no_huge = std::find(eal_args.begin(), eal_args.end(), "--no-huge") != eal_args.end();
  if (auto socket_mem = eal_option_value(eal_args, {"--socket-mem"}); socket_mem && !no_huge) {
    Reservation r{0, true, kHugepageBytes, "--socket-mem " + *socket_mem, {}};
    std::string_view rest = *socket_mem;
    for (int socket = 0;; ++socket) {
      const size_t comma = rest.find(',');
      const auto one = whole_mib(rest.substr(0, comma));
      if (!one || r.bytes + *one * kMiB > kMaxMib * kMiB) {
        return unexpected("eal_args: --socket-mem '" + *socket_mem + "' is not a list of MiB per socket (at most " +
                          std::to_string(kMaxMib) + " MiB in all)");
      }
      r.bytes += *one * kMiB;
      r.socket_bytes[socket] = *one * kMiB;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
    return r;
  }
  if (auto m = eal_option_value(eal_args, {"-m"})) {
    const auto v = whole_mib(*m);
    if (!v) return unexpected("eal_args: -m '" + *m + "' is not a number of MiB (at most " + std::to_string(kMaxMib) + ")");
    return Reservation{*v * kMiB, true, no_huge ? kSmallPageBytes : kHugepageBytes,
                       (no_huge ? "--no-huge -m " : "-m ") + *m, {}};
  }
  // rte_eal_init's memory without hugepages and without -m (MEMSIZE_IF_NO_HUGE_PAGE).
  if (no_huge) return Reservation{64 * kMiB, true, kSmallPageBytes, "--no-huge without -m: the EAL's default", {}};
  if (!free.total_bytes) {
    return Reservation{0, false, kHugepageBytes, "no hugepages on this machine, and no --socket-mem or -m", {}};
  }
  return Reservation{*free.total_bytes, false, kHugepageBytes,
                     free.node_bytes.empty() ? "the free hugepages now, no --socket-mem or -m"
                                             : "the free hugepages of each node now, no --socket-mem or -m",
                     free.node_bytes};
}

std::string Reservation::describe() const { return mib(bytes) + " (" + source + ")"; }

std::optional<uint64_t> Reservation::on_socket(int socket) const {
  if (socket_bytes.empty()) return std::nullopt;
  const auto at = socket_bytes.find(socket);
  return at == socket_bytes.end() ? 0 : at->second;
}

std::string describe_socket_share(const MemoryBudget::Socket& share, const Reservation& reservation) {
  const auto have = share.socket == config::kAnySocket ? std::nullopt : reservation.on_socket(share.socket);
  if (!have) {
    const std::string why = share.socket == config::kAnySocket ? "its socket unknown before the start"
                                                                : "not split by socket: " + reservation.source;
    return share.describe() + "; from the EAL's memory of any socket (" + why + "), in the total";
  }
  return share.describe() + "; the EAL will have " + mib(*have) + " there";
}

std::string budget_refusal(const MemoryBudget& budget, const Reservation& reservation) {
  constexpr std::string_view kAdvice = ": reserve more (eal_args), or lower limits.mbufs or the jobs' sizes";
  std::string out;
  for (const auto& share : budget.sockets) {
    const auto have = share.socket == config::kAnySocket ? std::nullopt : reservation.on_socket(share.socket);
    if (!have || share.total_bytes() <= *have) continue;
    out += (out.empty() ? "" : "\n") + std::string("memory: ") + share.describe() + "; the EAL will have " +
           mib(*have) + " there (" + reservation.source + ")" + std::string(kAdvice);
  }
  if (budget.total_bytes() > reservation.bytes) {
    out += (out.empty() ? "" : "\n") + std::string("memory: the config needs ") + budget.describe() +
           "; the EAL will have " + reservation.describe() + std::string(kAdvice);
  }
  return out;
}

}  // namespace phub::engine
