// An anti-replay window over 64-bit sequence numbers (docs/protocol.md, "Session packets"), for one
// direction of one session. A ring of 64-bit words as in RFC 6479, so that moving forward clears whole words; the high
// half of a number is inferred from the 32 bits a header carries, as IPsec's extended sequence numbers
// (RFC 4303, appendix A). Check before the tag is verified, commit after: a forged packet never moves it.
// Pure, no DPDK.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace phub::proto {

enum class Replay : uint8_t {
  fresh,     // not seen, and inside the window or ahead of it
  replayed,  // seen already
  too_old,   // behind the window: whether it was seen is no longer known
};

[[nodiscard]] std::string_view replay_name(Replay r) noexcept;

class ReplayWindow {
 public:
  static constexpr size_t kWords = 32;
  static constexpr size_t kBits = kWords * 64;  // 2048 bits of bitmap
  // Numbers accepted behind the highest committed one, counting it: one word less than the bitmap, the word
  // that moving forward clears.
  static constexpr uint64_t kSpan = kBits - 64;  // 1984

  // The 64-bit number whose low half is `low`: the one among the 2^32 numbers from the window's bottom
  // (highest committed - kSpan + 1) on, or while that bottom would lie below 0, the one below 2^32. A number
  // behind the bottom, or more than 2^32 - kSpan ahead of the highest committed, is misread as another; the
  // tag check (session_tag.hpp covers the high half) then refuses the packet. A session's numbers start low.
  [[nodiscard]] uint64_t infer(uint32_t low) const noexcept;

  // The verdict for `seq`, changing nothing (before the packet's tag is verified).
  [[nodiscard]] Replay check(uint64_t seq) const noexcept;

  // The same verdict, and when it is fresh, `seq` counts as seen (the window moves forward if it is ahead).
  // Call after the tag verified.
  Replay commit(uint64_t seq) noexcept;

  // The highest number committed (0 before any).
  [[nodiscard]] uint64_t top() const noexcept { return top_; }

 private:
  uint64_t top_ = 0;  // 0 with an empty bitmap accepts 0 as any other fresh number
  std::array<uint64_t, kWords> words_{};
};

}  // namespace phub::proto
