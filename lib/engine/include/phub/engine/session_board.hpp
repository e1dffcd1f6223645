// What the other lcores may read of one lcore's sessions with a job's ranks (docs/security.md, "Charged
// after authentication"): each rank's current and former session's worker-to-server tag key, reply address
// and the high half of its numbers, published by the owning lcore under a sequence lock. An lcore that
// receives a session packet meant for another lcore (RSS put it on its queue) checks the tag here before it
// hands the frame over, so that a forged frame takes no slot of the job's hand-off share. The owner still
// checks the number against its window, and the payload MAC.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "phub/proto/header.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::engine {

struct PeerSession;

class SessionBoard {
 public:
  explicit SessionBoard(uint16_t ranks);

  // The owner: the rank's sessions changed (a confirm made one).
  void publish(uint16_t rank, const PeerSession& current, const PeerSession& former) noexcept;
  // The owner: the high half of the numbers a session of the rank has taken moved (every 2^32 packets).
  void publish_high(uint16_t rank, bool former, uint32_t high) noexcept;
  // Any lcore: whether the session packet's header tag is the tag of one of the rank's sessions (for the high
  // half published, or the next one). False for a rank without sessions or out of range.
  [[nodiscard]] bool tag_matches(uint16_t rank, std::span<const std::byte, proto::kHeaderBytes> wire) const noexcept;

 private:
  struct Slot {
    std::atomic<uint32_t> version{0};  // odd while the owner writes
    std::atomic<uint64_t> k0[2]{};
    std::atomic<uint64_t> k1[2]{};
    std::atomic<uint64_t> reply[2]{};  // IPv4 << 16 | UDP port; 0: no session
    std::atomic<uint32_t> high[2]{};
  };
  uint16_t ranks_;
  std::unique_ptr<Slot[]> slots_;
};

}  // namespace phub::engine
