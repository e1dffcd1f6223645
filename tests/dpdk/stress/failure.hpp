// How the stress test reports a wrong result: a Failure carries the whole story (the event, what was
// expected, the first differing element); the EventLog keeps the schedule's last events to print with it.
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace phub::stress {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class EventKind : uint8_t {
  push, push_lost, push_again, push_late, push_early, push_deferred, rerequest, pull, init, init_lost,
  stall, result, result_late, result_lost, result_held, error,
};

struct Event {
  uint64_t tick = 0;
  EventKind kind = EventKind::push;
  uint8_t job = 0;
  uint16_t rank = 0;
  uint16_t queue = 0;
  uint32_t chunk = 0;
  uint32_t seg = 0;       // 0xffffffff: the whole chunk
  int64_t round = 0;      // absolute (a stall: its milliseconds; an error: its status)
};

// The last kSize events, oldest first when printed.
class EventLog {
 public:
  static constexpr size_t kSize = 40;
  void add(const Event& e) noexcept { events_[next_++ % kSize] = e; }
  [[nodiscard]] std::string format() const;

 private:
  std::array<Event, kSize> events_{};
  uint64_t next_ = 0;
};

}  // namespace phub::stress
