// MAC addresses: the one type every layer uses, equality for hot paths, and the text form "02:ab:cd:ef:00:ff".
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"

namespace phub {

using MacAddr = std::array<uint8_t, 6>;

inline constexpr MacAddr kBroadcastMac{0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

// Equality of two MAC addresses in two loads each (std::array's operator== calls memcmp out of line, twice
// per received frame on the server's hot path).
[[nodiscard]] inline bool mac_equal(const MacAddr& a, const MacAddr& b) noexcept {
  uint32_t a4, b4;
  uint16_t a2, b2;
  std::memcpy(&a4, a.data(), 4);
  std::memcpy(&b4, b.data(), 4);
  std::memcpy(&a2, a.data() + 4, 2);
  std::memcpy(&b2, b.data() + 4, 2);
  return ((a4 ^ b4) | static_cast<uint32_t>(a2 ^ b2)) == 0;
}

// "aa:bb:cc:dd:ee:ff": six octets of exactly two hex digits (either case) separated by ':'. The error quotes
// the text and names the fault:
//   "02:ab:cd:ef:00" is not a MAC address: it has 5 colon-separated octets, not 6
[[nodiscard]] Expected<MacAddr, std::string> parse_mac_address(std::string_view text);

// "02:ab:cd:ef:00:ff" (lower case).
[[nodiscard]] std::string format_mac(const MacAddr& mac);

}  // namespace phub
