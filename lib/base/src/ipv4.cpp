// Parsing and formatting of the text forms of IPv4 addresses and prefixes.
#include "phub/base/ipv4.hpp"

#include <cstdio>

#include "octets.hpp"

namespace phub {
namespace {

std::string quoted(std::string_view text) { return "\"" + std::string(text) + "\""; }

// A decimal field in 0..max, spelled without sign, white space or leading zero; else why it is not one.
// `what` names the field in the reason ("octet 4", "length").
Expected<uint32_t, std::string> decimal_field(std::string_view field, const std::string& what, uint32_t max) {
  if (field.empty()) return unexpected(what + " is empty");
  for (const char c : field) {
    if (c < '0' || c > '9') return unexpected(what + " (" + quoted(field) + ") is not a decimal number");
  }
  if (field.size() > 1 && field[0] == '0') return unexpected(what + " (" + quoted(field) + ") has a leading zero");
  uint64_t v = 0;
  for (const char c : field) {
    v = v * 10 + static_cast<uint64_t>(c - '0');
    if (v > max) return unexpected(what + " (" + std::string(field) + ") is above " + std::to_string(max));
  }
  return static_cast<uint32_t>(v);
}

// The address of `text`, or why it is not one (without the "... is not an IPv4 address" lead).
Expected<uint32_t, std::string> address_or_fault(std::string_view text) {
  auto octets = split_octets<4>(text, '.', "dot");
  if (!octets) return unexpected(octets.error());
  uint32_t addr = 0;
  for (size_t i = 0; i < octets->size(); ++i) {
    auto octet = decimal_field((*octets)[i], "octet " + std::to_string(i + 1), 255);
    if (!octet) return unexpected(octet.error());
    addr = (addr << 8) | *octet;
  }
  return addr;
}

}  // namespace

Expected<uint32_t, std::string> parse_ipv4_address(std::string_view text) {
  auto addr = address_or_fault(text);
  if (!addr) return unexpected(quoted(text) + " is not an IPv4 address: " + addr.error());
  return *addr;
}

Expected<Ipv4Prefix, std::string> parse_ipv4_prefix(std::string_view text) {
  const std::string lead = quoted(text) + " is not an IPv4 prefix (a.b.c.d/len): ";
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return unexpected(lead + "it has no \"/len\"");
  auto addr = address_or_fault(text.substr(0, slash));
  if (!addr) return unexpected(lead + "its address: " + addr.error());
  auto len = decimal_field(text.substr(slash + 1), "the length", 32);
  if (!len) return unexpected(lead + len.error());
  return Ipv4Prefix{*addr, static_cast<uint8_t>(*len)};
}

std::string format_ipv4(uint32_t addr) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff, addr & 0xff);
  return buf;
}

std::string format_ipv4_prefix(const Ipv4Prefix& p) { return format_ipv4(p.addr) + "/" + std::to_string(p.prefix_len); }

}  // namespace phub
