// `phub-probe run`: drives the agents through a round-robin tournament of paced probes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "report.hpp"

namespace phub::probe {

struct RunOptions {
  unsigned samples = 32;         // RTT samples per pair
  unsigned interval_us = 1000;   // pacing between samples
  unsigned timeout_us = 50000;   // per sample
  unsigned payload_bytes = 64;
  unsigned give_up_after = 4;    // a pair whose first samples all time out is recorded as missing
  bool bandwidth = false;
  uint64_t bulk_bytes = 1u << 20;
  int connect_timeout_ms = 2000;
  bool progress = true;          // live progress line on stderr
  std::string token;             // the agents' control token (auth.hpp)
};

// Whether the agents would take these options (control.hpp's limits) and a token is there.
[[nodiscard]] Expected<void, std::string> check_run_options(const RunOptions& o);

struct Measurement {
  topo::Matrix matrix;
  ProbeInfo info;
};

// Never fails because of unreachable or flaky hosts: they end up as missing pairs and in info.unreachable.
[[nodiscard]] Expected<Measurement, std::string> measure(const std::vector<topo::Host>& hosts, const RunOptions& o);

}  // namespace phub::probe
