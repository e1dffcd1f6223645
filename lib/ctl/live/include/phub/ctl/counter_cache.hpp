// The counters every reporter shows: refreshed by the control thread from the engine every
// control.metrics_interval_ms, read by phub-ctl, rte_telemetry and Prometheus (other threads), so that all
// three give the same values for the same refresh.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include "phub/engine/engine.hpp"

namespace phub::ctl {

struct CounterSample {
  engine::CounterReport report;
  uint64_t taken_unix_ms = 0;
  uint64_t sequence = 0;  // counts refreshes from 1
};

class CounterCache {
 public:
  // Control thread only (it reads the engine's current snapshot).
  void refresh(const engine::Engine& engine);
  // Any thread. Null before the first refresh.
  [[nodiscard]] std::shared_ptr<const CounterSample> latest() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const CounterSample> latest_;
  uint64_t sequence_ = 0;
};

}  // namespace phub::ctl
