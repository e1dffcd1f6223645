// What one generator run does (set from the command line or by a Lua scenario between runs).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "phub/gen/faults.hpp"
#include "phub/gen/partition.hpp"

namespace phub::pktgen {

// How the generator uses its port and lcores.
struct PortSettings {
  std::string devargs;            // any PMD: "net_memif0,role=client,socket=/run/x.sock", a PCI address, ...
  uint16_t queues = 0;            // RX/TX queue pairs; 0: one per server lcore
  uint32_t mbufs = 8191;          // per pool
  uint32_t idle_sleep_us = 0;     // back off after idle polls (shared machines); 0: busy-poll while running
  bool tx_copy = false;           // copy payloads instead of chaining the templates
  bool tx_chain = false;          // chain payloads even on net_memif (see Generator::create)
  uint64_t frame_cache_mb = 0;    // pre-built frames of jobs whose rounds wrap, over all lcores (0: none)
  uint32_t recycle_depth = 4;     // recycled push frames per (payload pattern, rank), per job and lcore (0: none)
};

struct RunSettings {
  gen::LoopMode mode = gen::LoopMode::closed;
  double rate_pps = 0;        // open loop: pushes per second over all lcores; 0 = as fast as the link takes
  double duration_s = 5;      // 0 with rounds > 0: until the rounds are done
  uint64_t rounds = 0;        // closed loop: rounds per worker, then stop
  double loss = 0;            // fraction of pushes not transmitted (retransmission recovers them)
  double dup = 0;             // fraction of pushes transmitted twice
  bool reorder = false;       // each worker pushes its segments in its own random order
  uint32_t window = 64;       // closed loop: unanswered pushes per worker
  double rto_ms = 20;         // first retransmit timeout (doubles up to 200 ms without progress)
  double drain_ms = 100;      // open loop: stop waiting for results after this long without one
  double settle_s = 10;       // deadline for finishing the last round after a run (0: do not settle)
  uint32_t progress_ms = 1000;  // live progress line period; 0 = none
  std::array<uint64_t, gen::kFaultCount> inject{};  // bad packets to mix into the run
  uint32_t inject_job = 0;    // job id the bad packets imitate (0: the first job)
  uint64_t seed = 1;
};

}  // namespace phub::pktgen
