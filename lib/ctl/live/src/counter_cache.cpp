// The shared counter sample (see counter_cache.hpp).
#include "phub/ctl/counter_cache.hpp"

#include <chrono>

namespace phub::ctl {

void CounterCache::refresh(const engine::Engine& engine) {
  auto s = std::make_shared<CounterSample>();
  s->report = engine.report();
  s->taken_unix_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
  std::lock_guard lock(mu_);
  s->sequence = ++sequence_;
  latest_ = std::move(s);
}

std::shared_ptr<const CounterSample> CounterCache::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

}  // namespace phub::ctl
