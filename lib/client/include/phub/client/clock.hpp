// Monotonic time in nanoseconds for the client's timers and deadlines.
#pragma once

#include <time.h>

#include <cstdint>

namespace phub::client {

[[nodiscard]] inline uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace phub::client
