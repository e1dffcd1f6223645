// IPv4 addresses and prefixes as text ("198.18.0.1", "198.18.0.0/15"): strict parsing that names the
// fault, and formatting.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"

namespace phub {

// An IPv4 address in host byte order with a prefix length.
struct Ipv4Prefix {
  uint32_t addr = 0;  // host order
  uint8_t prefix_len = 32;

  bool operator==(const Ipv4Prefix&) const = default;
};

// The netmask of a prefix length 0..32, host order: 24 -> 0xffffff00, 0 -> 0.
[[nodiscard]] constexpr uint32_t ipv4_netmask(uint8_t prefix_len) noexcept {
  return prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
}

// "a.b.c.d": exactly four decimal octets 0..255 with no sign, white space or leading zero (except "0"),
// the forms inet_pton accepts. Host byte order. The error quotes the text and names the fault:
//   "1.2.3.256" is not an IPv4 address: octet 4 (256) is above 255
[[nodiscard]] Expected<uint32_t, std::string> parse_ipv4_address(std::string_view text);
// "a.b.c.d/len" with len 0..32 in decimal (no leading zero). The address may have host bits set.
[[nodiscard]] Expected<Ipv4Prefix, std::string> parse_ipv4_prefix(std::string_view text);

// "198.18.0.1" from a host-order address.
[[nodiscard]] std::string format_ipv4(uint32_t addr);
// "198.18.0.0/15"
[[nodiscard]] std::string format_ipv4_prefix(const Ipv4Prefix& p);

}  // namespace phub
