// The periodic one-line progress report of phub-server (rates from counter deltas).
#pragma once

#include <chrono>
#include <string>

#include "phub/engine/engine.hpp"

namespace phub::server {

class StatsLine {
 public:
  explicit StatsLine(const engine::Engine& e) : engine_(e), last_(e.totals()), t_(std::chrono::steady_clock::now()) {}

  // Counters since the previous call, as rates.
  std::string next() {
    const auto now = std::chrono::steady_clock::now();
    const engine::Totals cur = engine_.totals();
    const double dt = std::chrono::duration<double>(now - t_).count();
    uint64_t goodput = 0, rounds = 0, rounds_total = 0, drops = 0;
    for (size_t j = 0; j < cur.jobs.size(); ++j) {
      goodput += cur.jobs[j].push_payload_bytes - last_.jobs[j].push_payload_bytes;
      rounds += cur.jobs[j].rounds_completed - last_.jobs[j].rounds_completed;
      rounds_total += cur.jobs[j].rounds_completed;
    }
    for (size_t d = 0; d < engine::kDropCount; ++d) drops += cur.lcores.drops[d];
    for (size_t d = 0; d < proto::kParseErrorCount; ++d) drops += cur.lcores.malformed[d];
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "stats: rx %.3f Mpps, tx %.3f Mpps, goodput %.3f Gbit/s, %.0f chunk rounds/s, rounds %llu, "
                  "drops %llu",
                  dt > 0 ? static_cast<double>(cur.lcores.rx_packets - last_.lcores.rx_packets) / dt / 1e6 : 0.0,
                  dt > 0 ? static_cast<double>(cur.lcores.tx_packets - last_.lcores.tx_packets) / dt / 1e6 : 0.0,
                  dt > 0 ? static_cast<double>(goodput) * 8 / dt / 1e9 : 0.0,
                  dt > 0 ? static_cast<double>(rounds) / dt : 0.0, static_cast<unsigned long long>(rounds_total),
                  static_cast<unsigned long long>(drops));
    last_ = cur;
    t_ = now;
    return buf;
  }

 private:
  const engine::Engine& engine_;
  engine::Totals last_;
  std::chrono::steady_clock::time_point t_;
};

}  // namespace phub::server
