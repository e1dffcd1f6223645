// Parsing and formatting of the text form of MAC addresses.
#include "phub/base/mac.hpp"

#include <cstdio>

#include "octets.hpp"

namespace phub {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The address of `text`, or why it is not one (without the "... is not a MAC address" lead).
Expected<MacAddr, std::string> address_or_fault(std::string_view text) {
  auto octets = split_octets<6>(text, ':', "colon");
  if (!octets) return unexpected(octets.error());
  MacAddr mac{};
  for (size_t i = 0; i < mac.size(); ++i) {
    const std::string_view octet = (*octets)[i];
    const int hi = octet.size() == 2 ? hex_digit(octet[0]) : -1;
    const int lo = octet.size() == 2 ? hex_digit(octet[1]) : -1;
    if (hi < 0 || lo < 0) {
      return unexpected("octet " + std::to_string(i + 1) + " (\"" + std::string(octet) + "\") is not two hex digits");
    }
    mac[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return mac;
}

}  // namespace

Expected<MacAddr, std::string> parse_mac_address(std::string_view text) {
  auto mac = address_or_fault(text);
  if (!mac) return unexpected("\"" + std::string(text) + "\" is not a MAC address: " + mac.error());
  return *mac;
}

std::string format_mac(const MacAddr& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return buf;
}

}  // namespace phub
