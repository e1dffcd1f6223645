// The validated, immutable configuration of a phub server (what a Lua config file turns into).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "phub/base/dtype.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/base/mac.hpp"

namespace phub::config {

// How a packet that reaches the wrong lcore's queue gets to its owner.
enum class Steering : uint8_t {
  automatic,  // rte_flow rules where the PMD validates them, else the ring hand-off
  flow,       // rte_flow rules required; start-up fails if the PMD refuses them
  ring,       // never install flow rules; RSS or fan-out, then the owner's ring
};

// What the server does with a UDP checksum the port's PMD did not check (af_packet, memif, ring: no offload).
enum class UdpChecksum : uint8_t {
  verify,  // check it in software; a wrong one is dropped (udp_checksum_bad). A 0 field (none) is accepted.
  trust,   // do not: the PMD's verdict only (for links whose senders leave partial checksums, e.g. veth)
};

struct Port {
  std::string name;             // referenced by lcores[].ports; unique
  std::string device;           // DPDK devargs: "net_tap0,iface=phub0", "net_memif0,role=server,...", a PCI address
  Ipv4Prefix ipv4;              // the server's address on this port
  std::optional<MacAddr> mac;   // override the PMD's MAC
  uint16_t mtu = 1500;          // IP MTU, 576..9000
  uint16_t rx_desc = 1024;      // per queue
  uint16_t tx_desc = 1024;      // per queue
  Steering steering = Steering::automatic;
  bool tx_copy = false;         // copy each result into its own frame instead of chaining the shared buffer
  UdpChecksum udp_checksum = UdpChecksum::verify;

  bool operator==(const Port&) const = default;
};

// A poll-mode worker lcore. It owns one RX/TX queue pair on each of its ports; the queue index is the
// lcore's position in Config::lcores. Lcore 0 stays the control (main) lcore and is never listed.
struct Lcore {
  unsigned id = 0;                 // EAL lcore id, 1..RTE_MAX_LCORE-1; unique
  std::vector<std::string> ports;  // names of the ports it polls; empty means all ports
  bool cross_socket = false;       // may poll a port on another NUMA socket (config::place_memory)

  bool operator==(const Lcore&) const = default;
};

// Back-off of an lcore after a run of empty polls (for shared or small machines).
struct Polling {
  uint32_t idle_polls_before_sleep = 0;  // 0 = busy-poll forever (a dedicated appliance)
  uint32_t idle_sleep_us = 0;            // sleep after that many empty polls, 0..100000

  bool operator==(const Polling&) const = default;
};

enum class JobMode : uint8_t { allreduce, ps };
enum class Reduce : uint8_t { sum, mean };
// What the server does with a push that carries NaN or Inf its rank did not declare (docs/server.md,
// "Non-finite values"): refuse it with an error to the rank, or take it (summed in allreduce; in ps a
// non-finite round is skipped, never applied). Counted either way.
enum class Nonfinite : uint8_t { refuse, pass };
enum class OptimizerKind : uint8_t { sgd, momentum, nesterov, adam };

struct Optimizer {
  OptimizerKind kind = OptimizerKind::sgd;
  float lr = 0.01f;            // > 0
  float momentum = 0.9f;       // momentum and nesterov; 0..1
  float beta1 = 0.9f;          // adam; [0, 1)
  float beta2 = 0.999f;        // adam; [0, 1)
  float eps = 1e-8f;           // adam; > 0
  float weight_decay = 0.0f;   // >= 0 (L2 added to the gradient; adam: decoupled when adamw is true)
  bool adamw = false;

  bool operator==(const Optimizer&) const = default;
};

// Parameter-server checkpoints (docs/persistence.md): where and how often a ps job's weights and
// optimizer state are written. Config::checkpoints holds the server-wide defaults; a ps job's own
// `checkpoint` table overrides any field. The loader resolves them into Job::checkpoint.
struct Checkpoints {
  std::string dir;            // absolute path of an existing directory; empty = no checkpoints
  uint32_t every_rounds = 0;  // after every N-th round (0 = not by rounds)
  uint32_t every_s = 0;       // at the first round boundary T seconds after the last one (0 = not by time)
  uint32_t keep = 3;          // newest files kept per job shard, 1..1000

  [[nodiscard]] bool enabled() const noexcept { return !dir.empty(); }
  bool operator==(const Checkpoints&) const = default;
};

// One tensor of a job. Keys are chunked in declaration order.
struct Key {
  std::string name;     // unique within the job
  uint64_t elems = 0;   // 1..2^31

  bool operator==(const Key&) const = default;
};

struct Job {
  uint32_t id = 0;                 // 1..2^32-1, unique; carried in every packet
  std::string name;                // unique, for logs and telemetry
  JobMode mode = JobMode::allreduce;
  Reduce reduce = Reduce::sum;     // allreduce mode: sum or mean
  Dtype dtype = Dtype::fp32;       // element type of pushes (and of allreduce results)
  bool deterministic = false;      // sum in rank order: bit-identical results whatever the arrival order
  Nonfinite nonfinite = Nonfinite::pass;  // loader default: refuse in ps mode, pass in allreduce
  uint16_t workers = 0;            // 1..1024
  uint16_t port_base = 0;          // lcore i of Config::lcores receives this job's chunks on port_base + i
  std::string secret;              // authenticates packets; at least 16 bytes unless insecure
  bool insecure = false;           // accept no secret, or one under 16 bytes (docs/security.md)
  bool sessions = false;           // every rank's packets are session packets (per-rank keys, sequence numbers,
                                   // anti-replay; docs/protocol.md, "Sessions"); needs a secret. The loader
                                   // turns it on for every job with a secret; off with a secret needs insecure
  bool payload_mac = false;        // session packets with elements also carry a payload MAC; needs sessions
  bool interface_map = false;      // workers send each chunk to its lcore's home port (config::interface_map),
                                   // whose address every joined answer names; false: to the address they joined
  uint64_t quota_bytes = 0;        // the job's memory limit; admission fails above it (loader default: limits)
  uint32_t chunk_bytes = 32768;    // bytes of fp32 state per chunk; multiple of 64, 1 KiB..1 MiB
  std::vector<Key> keys;           // at least one
  Optimizer optimizer;             // ps mode
  uint32_t round_modulus = 0;      // rounds count modulo this (0 = 2^32); lets looped pcap traces keep working
  // Sharded PS: the job's chunks are spread over shard_count servers with the same number of lcores;
  // this server is shard shard_index and owns chunk owners shard_index * lcores .. + lcores - 1.
  uint16_t shard_count = 1;        // 1..256
  uint16_t shard_index = 0;        // 0..shard_count-1
  uint64_t rate_limit_pps = 0;     // packets per second accepted from this job; 0 = unlimited
  uint64_t answer_bytes_per_s = 0; // frame bytes per second of results sent in answer to requests; 0 = unlimited
  std::vector<Ipv4Prefix> allowed_sources;  // source addresses allowed to push; empty = any
  std::vector<uint32_t> worker_ipv4;        // rank r pushes only from worker_ipv4[r] (host order); empty = any
  // Rack hierarchy: for each rack name in Config::racks (in that order), the ranks of this job that live there.
  // Empty when the deployment has no racks.
  std::vector<std::pair<std::string, std::vector<uint16_t>>> ranks_by_rack;
  Checkpoints checkpoint;          // ps mode: the server-wide checkpoints with the job's overrides

  bool operator==(const Job&) const = default;
};

// A rack of the hierarchical deployment: its name and its hub. Which ranks live there is each job's
// ranks_by_rack.
struct Rack {
  std::string name;                 // unique
  uint32_t hub_ipv4 = 0;            // host order
  uint16_t hub_port_base = 0;       // 0 = same as the job's port_base

  bool operator==(const Rack&) const = default;
};

struct Timeouts {
  uint32_t round_stall_ms = 2000;   // a round not complete after this is reported to its workers as stalled
  uint32_t drain_ms = 2000;         // budget for rounds in progress: of a job a reload removes, and at shutdown
                                    // for the results still queued
  uint32_t secret_overlap_ms = 30000;  // a reload that rotates a job's secret accepts the old one this long

  bool operator==(const Timeouts&) const = default;
};

struct Limits {
  uint64_t memory_bytes = 1ull << 30;  // all jobs together
  uint32_t max_jobs = 64;
  uint32_t mbufs = 16383;              // per port mempool, (2^n - 1 is best)
  uint32_t ring_entries = 4096;        // per-lcore hand-off ring (power of two)
  // ARP and ICMP echo answers, per port and lcore: a token bucket of arp_icmp_burst refilled at
  // arp_icmp_per_s (0 = unlimited).
  uint32_t arp_icmp_per_s = 1000;
  uint32_t arp_icmp_burst = 50;

  bool operator==(const Limits&) const = default;
};

struct Control {
  std::string socket_path = "/run/phub/ctl.sock";
  uint32_t stats_interval_ms = 0;   // 0 = no periodic stats line
  std::string metrics_address = "127.0.0.1:9464";  // the Prometheus endpoint; empty = none
  uint32_t metrics_interval_ms = 1000;  // how often the counters phub-ctl, telemetry and Prometheus show are taken

  bool operator==(const Control&) const = default;
};

struct Config {
  std::vector<std::string> eal_args;   // EAL arguments before any CLI override
  std::vector<Port> ports;
  std::vector<Lcore> lcores;
  Polling polling;
  std::vector<Job> jobs;
  std::vector<Rack> racks;
  std::string rack;                    // this server's rack name; empty = not hierarchical
  Timeouts timeouts;
  Limits limits;
  Control control;
  Checkpoints checkpoints;             // defaults for every ps job's checkpoint (allreduce jobs have none)

  bool operator==(const Config&) const = default;
};

}  // namespace phub::config
