// Round numbers: the emulated workers count absolute rounds (-1 is the ps initial weights); the wire
// carries them modulo the job's round_modulus (2^32 when 0). A result labelled r always holds the state
// after round r, also when it answers a ps pull or init (protocol version 2: such answers carry
// prev_round(current); before the first update that is round -1, the initial weights).
#pragma once

#include <cstdint>
#include <optional>

namespace phub::stress {

[[nodiscard]] constexpr uint32_t round_label(int64_t round, uint32_t modulus) noexcept {
  if (modulus == 0) return static_cast<uint32_t>(round);
  const auto m = static_cast<int64_t>(modulus);
  return static_cast<uint32_t>(((round % m) + m) % m);
}

// The absolute round in [lo, hi] that carries `label`, if exactly one does (a window narrower than the
// modulus has at most one).
[[nodiscard]] constexpr std::optional<int64_t> round_of_label(uint32_t label, uint32_t modulus, int64_t lo,
                                                              int64_t hi) noexcept {
  for (int64_t r = lo; r <= hi; ++r) {
    if (round_label(r, modulus) == label) return r;
  }
  return std::nullopt;
}

// The signed distance a - b of two labels as docs/protocol.md defines it (modulo the modulus, centred on 0):
// what the server decides "previous", "behind" and "ahead" by.
[[nodiscard]] constexpr int64_t label_delta(uint32_t a, uint32_t b, uint32_t modulus) noexcept {
  if (modulus == 0) return static_cast<int32_t>(a - b);
  const auto m = static_cast<int64_t>(modulus);
  int64_t d = ((static_cast<int64_t>(a) - static_cast<int64_t>(b)) % m + m) % m;
  if (d > m / 2) d -= m;
  return d;
}

}  // namespace phub::stress
