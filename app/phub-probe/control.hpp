// The agent's control protocol (TCP, one text line per command and reply, after the handshake of auth.hpp;
// every line then carries its MAC) and the limits the agent enforces on it.
//   HELLO                                  -> OK phub-probe 2 <transport> <probe_addr>:<probe_port>
//   HOSTS <n> (<ctl_addr:port> <probe_addr:port>){n}
//                                          -> OK <n>   the run's hosts; once per connection, before PROBE/BULK
//   PROBE <addr> <port> <count> <interval_us> <timeout_us> <payload_bytes> <give_up_after>
//                                          -> SAMPLES <sent> <rtt_ns>...   (to a probe endpoint of the run)
//   BULK <addr> <port> <bytes>             -> BW <bytes_per_s>   (a timed SINK to a control endpoint of the run)
//   SINK <bytes> then <bytes> raw bytes    -> OK                 (from another agent, which authenticated too)
//   QUIT
//   a refusal                              -> ERR refused: <reason>
//   anything else, or a failure            -> ERR <reason>
#pragma once

#include <cstdint>
#include <string>

#include "transport.hpp"

namespace phub::probe {

inline constexpr const char* kProtocolGreeting = "OK phub-probe 2";
inline constexpr const char* kRefused = "ERR refused: ";

// What one command may make an agent do, and how many connections it serves. Documented in docs/probe.md.
struct Limits {
  static constexpr unsigned kMaxSamples = 10'000;           // PROBE count
  static constexpr unsigned kMinIntervalUs = 100;           // PROBE pacing: at most 10,000 requests/s
  static constexpr unsigned kMaxIntervalUs = 1'000'000;
  static constexpr unsigned kMinTimeoutUs = 100, kMaxTimeoutUs = 1'000'000;
  static constexpr uint64_t kMaxProbeUs = 300'000'000;      // count x (interval + timeout): 5 minutes
  static constexpr uint64_t kMaxBulkBytes = 64ull << 20;    // BULK and SINK
  static constexpr size_t kMaxRunHosts = 1024;              // HOSTS
  static constexpr unsigned kMaxConnections = 16;           // control connections open at once (one thread each)
  static constexpr int kHandshakeTimeoutMs = 3000;          // to answer the challenge
};

// Why the agent refuses these probe parameters ("" when it does not). payload_bytes is the probe body.
[[nodiscard]] std::string probe_refusal(const ProbeParams& p);
// Why it refuses a bulk transfer of this size ("" when it does not).
[[nodiscard]] std::string bulk_refusal(uint64_t bytes);

}  // namespace phub::probe
