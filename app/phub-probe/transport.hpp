// How an agent sends probe requests and answers them: one small interface with two implementations, kernel
// UDP (portable) and a DPDK port with TSC timestamps (dpdk_transport.hpp).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/topo/matrix.hpp"

namespace phub::probe {

struct ProbeParams {
  unsigned count = 32;          // requests sent
  unsigned interval_us = 1000;  // pacing between request starts
  unsigned timeout_us = 50000;  // wait for each reply
  unsigned payload_bytes = 24;  // probe body (probe_body.hpp; at least 24 bytes: stamp, nonce, turnaround)
  unsigned give_up_after = 4;   // stop early when the first this-many requests all went unanswered
};

struct ProbeSamples {
  unsigned sent = 0;
  std::vector<double> rtt_us;  // one per reply received in time
};

class ProbeTransport {
 public:
  virtual ~ProbeTransport() = default;
  // Sends paced probe_request messages to `peer` and times the matching probe_reply messages.
  [[nodiscard]] virtual Expected<ProbeSamples, std::string> probe(const topo::Host& peer, const ProbeParams& p) = 0;
  // Answers probe_request messages on the local endpoint until `stop` is set (checked at least every 200 ms).
  virtual void reflect(const std::atomic<bool>& stop) = 0;
  [[nodiscard]] virtual std::string_view name() const = 0;
  // Where peers send probe_request datagrams (the agent's greeting advertises it to the coordinator).
  [[nodiscard]] virtual topo::Host endpoint() const = 0;
};

// Kernel UDP on the agent's address and port; receive times from SO_TIMESTAMPNS.
[[nodiscard]] Expected<std::unique_ptr<ProbeTransport>, std::string> make_kernel_udp(const topo::Host& local);

}  // namespace phub::probe
