// The DPDK probe transport: one poller thread owns the port; probes are handed to it and timed with the TSC.
#include "dpdk_transport.hpp"

#include <rte_cycles.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>

#include "dpdk_station.hpp"
#include "phub/base/eal_args.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"
#include "phub/drivers/eal.hpp"
#include "phub/drivers/mempool.hpp"
#include "poll_window.hpp"

namespace phub::probe {
namespace {

constexpr uint32_t kPoolMbufs = 2047;
constexpr unsigned kArpAttempts = 5;
constexpr uint64_t kArpWaitMs = 200;
constexpr uint64_t kMinPeriodUs = 20;      // request periods the reflector learns (arrivals_)
constexpr uint64_t kMaxPeriodUs = 100'000;
constexpr uint64_t kExactPollUs = 5;       // a request found this soon after an empty poll was timed exactly

class DpdkTransport final : public ProbeTransport {
 public:
  DpdkTransport(drivers::Eal eal, drivers::Mempool pool, drivers::EthPort port, const StationAddr& addr,
                unsigned idle_sleep_us)
      : eal_(std::move(eal)),
        pool_(std::move(pool)),
        port_(std::move(port)),
        hz_(rte_get_tsc_hz()),
        station_(port_, pool_.get(), addr, hz_),
        slice_(us_to_cycles(idle_sleep_us)),
        arrivals_(us_to_cycles(kMinPeriodUs), us_to_cycles(kMaxPeriodUs)) {}

  Expected<ProbeSamples, std::string> probe(const topo::Host& peer, const ProbeParams& p) override {
    auto ip = parse_ipv4_address(peer.addr);
    if (!ip) return unexpected(ip.error());
    Job job{*ip, peer.port, p, static_cast<uint32_t>(std::random_device{}()), {}, {}, false};
    job.samples.rtt_us.reserve(p.count);  // the poller does not allocate
    std::lock_guard one_at_a_time(probe_mu_);
    std::unique_lock lock(mu_);
    if (!polling_) return unexpected(std::string("the DPDK port is not being polled"));
    job_.store(&job, std::memory_order_release);
    done_cv_.wait(lock, [&] { return job.done; });
    if (!job.error.empty()) return unexpected(job.error);
    return std::move(job.samples);
  }

  void reflect(const std::atomic<bool>& stop) override {
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // short idle sleeps stay short
    {
      std::lock_guard lock(mu_);
      polling_ = true;
    }
    const uint64_t exact_cycles = us_to_cycles(kExactPollUs);
    uint64_t seen_request = 0, last_poll = rte_rdtsc();
    while (!stop.load(std::memory_order_relaxed)) {
      if (Job* j = job_.load(std::memory_order_acquire)) {
        run(*j, stop);
        finish(*j);
        continue;
      }
      const uint64_t poll_at = rte_rdtsc();
      const unsigned ours = station_.poll(nullptr);
      if (station_.last_request_tsc() != seen_request) {
        seen_request = station_.last_request_tsc();
        const bool exact = poll_at - last_poll <= exact_cycles;
        found_busy_ += exact ? 1 : 0;
        arrivals_.observe(exact ? poll_at : last_poll, exact);
      }
      last_poll = poll_at;
      if (ours == 0) nap(arrivals_.window(2 * slice_).nap(rte_rdtsc(), slice_));
    }
    {
      std::lock_guard lock(mu_);
      polling_ = false;
      if (Job* j = job_.exchange(nullptr)) {
        j->error = "the agent is stopping";
        j->done = true;
      }
    }
    done_cv_.notify_all();
    report();
  }

  std::string_view name() const override { return "dpdk"; }
  topo::Host endpoint() const override {
    const std::string ip = format_ipv4(station_.addr().ip);
    return {ip, ip, station_.addr().udp_port};
  }

 private:
  struct Job {
    uint32_t peer_ip;
    uint16_t peer_port;
    ProbeParams params;
    uint32_t nonce;
    ProbeSamples samples;
    std::string error;
    bool done;
  };

  [[nodiscard]] uint64_t us_to_cycles(uint64_t us) const { return hz_ * us / 1'000'000u; }

  // Sleeps about `cycles` (nothing for 0); the timer slack is 1 ns, so short naps stay short.
  void nap(uint64_t cycles) const {
    if (cycles != 0) std::this_thread::sleep_for(std::chrono::nanoseconds(station_.cycles_to_ns(cycles)));
  }

  void finish(Job& j) {
    {
      std::lock_guard lock(mu_);
      j.done = true;
      job_.store(nullptr, std::memory_order_relaxed);
    }
    done_cv_.notify_all();
  }

  // Polls until the TSC reaches `until`, napping in between: a late start costs nothing, as requests are
  // stamped when they leave.
  void pace_until(uint64_t until) {
    for (uint64_t now = rte_rdtsc(); now < until; now = rte_rdtsc())
      if (station_.poll(nullptr) == 0) nap(std::min(slice_, until - now));
  }

  // Polls for the reply. Busy around the time the best RTT so far predicts (a nap there would add its
  // overshoot to a near-minimum sample); napping before and well after it, so a long RTT or a stalled peer
  // does not hold the CPU. The first request of a probe has no prediction: busy for one slice, then naps.
  void await(AwaitedReply& awaited, uint64_t deadline, uint64_t best_raw) {
    const PollWindow w{awaited.stamp_tsc + best_raw, std::max(best_raw / 8, 2 * slice_), std::max(best_raw / 4, slice_)};
    for (uint64_t now = rte_rdtsc(); !awaited.arrived && now < deadline; now = rte_rdtsc())
      if (station_.poll(&awaited) == 0) nap(std::min(w.nap(now, slice_), deadline - now));
  }

  // The peer's (or gateway's) MAC, asking by ARP when it is not cached.
  Expected<MacAddr, std::string> resolve(uint32_t peer_ip) {
    const uint32_t hop = station_.next_hop(peer_ip);
    if (hop == 0) return unexpected(format_ipv4(peer_ip) + " is off-link and the agent has no --gateway");
    for (unsigned attempt = 0; attempt < kArpAttempts; ++attempt) {
      if (const MacAddr* mac = station_.mac_of(hop)) return *mac;
      (void)station_.send_arp_request(hop, us_to_cycles(kArpWaitMs * 1000));
      const uint64_t deadline = rte_rdtsc() + us_to_cycles(kArpWaitMs * 1000);
      while (station_.mac_of(hop) == nullptr && rte_rdtsc() < deadline) (void)station_.poll(nullptr);
    }
    if (const MacAddr* mac = station_.mac_of(hop)) return *mac;
    return unexpected("no ARP reply from " + format_ipv4(hop) + " on the DPDK port");
  }

  // The prober: paced requests, each timed from its TSC stamp to the RX burst that brought its reply.
  // A stopping agent ends the probe early, with the samples it has.
  void run(Job& j, const std::atomic<bool>& stop) {
    auto mac = resolve(j.peer_ip);
    if (!mac) return void(j.error = mac.error());
    const ProbeTarget to{*mac, j.peer_ip, j.peer_port};
    const ProbeParams& p = j.params;
    const uint64_t interval = us_to_cycles(p.interval_us), timeout = us_to_cycles(p.timeout_us);
    uint64_t next_start = rte_rdtsc();
    uint64_t best_raw = 0;  // the best raw RTT so far, cycles (0: none yet)
    for (uint32_t seq = 0; seq < p.count && !stop.load(std::memory_order_relaxed); ++seq) {
      pace_until(next_start);
      next_start = std::max(next_start + interval, rte_rdtsc());  // on the grid, so a reflector can predict it
      AwaitedReply awaited{j.peer_ip, j.peer_port, seq, j.nonce};
      ++j.samples.sent;
      awaited.stamp_tsc = station_.send_probe_request(to, seq, j.nonce, p.payload_bytes);
      if (awaited.stamp_tsc != 0) await(awaited, awaited.stamp_tsc + timeout, best_raw);
      if (awaited.arrived) {
        const uint64_t raw = awaited.rx_tsc - awaited.stamp_tsc;
        best_raw = best_raw == 0 ? raw : std::min(best_raw, raw);
        const uint64_t raw_ns = station_.cycles_to_ns(raw);
        j.samples.rtt_us.push_back(static_cast<double>(net_rtt_ns(raw_ns, awaited.turnaround_ns)) / 1000.0);
      }
      if (j.samples.sent == p.give_up_after && j.samples.rtt_us.empty()) break;
    }
  }

  void report() const {
    const StationCounters& c = station_.counters();
    std::fprintf(stderr,
                 "phub-probe agent: dpdk port %s: %llu frames received, %llu probe requests reflected (%llu found "
                 "busy-polling), %llu ARP and %llu ping answered, %llu probe replies matched, %llu unmatched, "
                 "%llu TX failures, %llu unsolicited ARP ignored\n",
                 port_.name().c_str(), static_cast<unsigned long long>(c.rx_frames),
                 static_cast<unsigned long long>(c.reflected), static_cast<unsigned long long>(found_busy_),
                 static_cast<unsigned long long>(c.arp_answered),
                 static_cast<unsigned long long>(c.pings_answered), static_cast<unsigned long long>(c.replies_matched),
                 static_cast<unsigned long long>(c.replies_unmatched), static_cast<unsigned long long>(c.tx_failed),
                 static_cast<unsigned long long>(c.arp_ignored));
  }

  drivers::Eal eal_;  // members are destroyed in reverse: the port closes before its pool, both before the EAL
  drivers::Mempool pool_;
  drivers::EthPort port_;
  uint64_t hz_;
  Station station_;
  uint64_t slice_;  // idle nap, TSC cycles (0: busy-poll)
  ArrivalPredictor arrivals_;
  uint64_t found_busy_ = 0;  // probe requests found right after an empty poll, not after a nap
  std::mutex probe_mu_;  // one probe at a time
  std::mutex mu_;        // guards polling_ and the hand-over of a Job
  std::condition_variable done_cv_;
  std::atomic<Job*> job_{nullptr};
  bool polling_ = false;
};

}  // namespace

Expected<std::unique_ptr<ProbeTransport>, std::string> make_dpdk_transport(const DpdkAgentOptions& o) {
  auto prefix = parse_ipv4_prefix(o.ipv4_cidr);
  if (!prefix) return unexpected("--ipv4: " + prefix.error());
  if (prefix->prefix_len == 0) return unexpected("--ipv4 \"" + o.ipv4_cidr + "\": the prefix length must be 1..32");
  uint32_t gateway = 0;
  if (!o.gateway.empty()) {
    auto gw = parse_ipv4_address(o.gateway);
    if (!gw) return unexpected("--gateway: " + gw.error());
    gateway = *gw;
  }
  if (o.port_devargs.empty()) return unexpected(std::string("--port DEVARGS is required with --dpdk"));
  // The EAL pins the calling thread to its main lcore; the agent's threads keep the CPUs they had.
  auto eal = drivers::Eal::start("phub-probe", split_eal_args(o.eal_args), /*keep_thread_affinity=*/true);
  if (!eal) return unexpected(eal.error());
  // At real-time priority the poller's naps must give the CPU away: the agents of a test share two CPUs.
  if (auto refusal = realtime_polling_refusal(eal->realtime(), o.idle_sleep_us, "--idle-sleep-us"); !refusal.empty()) {
    return unexpected(refusal);
  }
  auto pool = drivers::Mempool::create("phub_probe_rx", kPoolMbufs, RTE_MBUF_DEFAULT_BUF_SIZE,
                                       static_cast<int>(rte_socket_id()), 32);
  if (!pool) return unexpected(pool.error());
  drivers::PortSpec spec;
  spec.devargs = o.port_devargs;
  spec.rx_desc = 512;
  spec.tx_desc = 512;
  spec.rx_pool = pool->get();
  auto port = drivers::EthPort::open(spec);
  if (!port) return unexpected(port.error());
  std::fprintf(stderr, "phub-probe agent: %s, ipv4 %s, TSC %.3f GHz\n", port->describe().c_str(), o.ipv4_cidr.c_str(),
               static_cast<double>(rte_get_tsc_hz()) / 1e9);
  const StationAddr addr{port->mac(), prefix->addr, ipv4_netmask(prefix->prefix_len), gateway, o.udp_port};
  return std::unique_ptr<ProbeTransport>(
      std::make_unique<DpdkTransport>(std::move(*eal), std::move(*pool), std::move(*port), addr, o.idle_sleep_us));
}

}  // namespace phub::probe
