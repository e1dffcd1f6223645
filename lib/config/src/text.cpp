// Parsing and formatting of the text forms of config values (addresses, prefixes, MACs, sizes).
#include "phub/config/text.hpp"

#include <array>
#include <charconv>
#include <cstdio>

namespace phub::config {
namespace {

// A decimal number of at most max_digits digits with no leading zero (except "0" itself).
std::optional<uint64_t> parse_decimal(std::string_view s, size_t max_digits) {
  if (s.empty() || s.size() > max_digits || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct Unit {
  std::string_view suffix;
  uint64_t bytes;
};

constexpr std::array<Unit, 9> kUnits{{
    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    {"KB", 1000ull}, {"MB", 1000ull * 1000}, {"GB", 1000ull * 1000 * 1000}, {"TB", 1000ull * 1000 * 1000 * 1000},
    {"B", 1},
}};

}  // namespace

std::optional<uint32_t> parse_ipv4(std::string_view text) {
  uint32_t addr = 0;
  for (int i = 0; i < 4; ++i) {
    size_t dot = i < 3 ? text.find('.') : text.size();
    if (dot == std::string_view::npos) return std::nullopt;
    auto octet = parse_decimal(text.substr(0, dot), 3);
    if (!octet || *octet > 255) return std::nullopt;
    addr = (addr << 8) | static_cast<uint32_t>(*octet);
    text.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  return addr;
}

std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto addr = parse_ipv4(text.substr(0, slash));
  auto len = parse_decimal(text.substr(slash + 1), 2);
  if (!addr || !len || *len > 32) return std::nullopt;
  return Ipv4Prefix{*addr, static_cast<uint8_t>(*len)};
}

std::optional<MacAddr> parse_mac(std::string_view text) {
  if (text.size() != 17) return std::nullopt;
  MacAddr mac{};
  for (size_t i = 0; i < 6; ++i) {
    int hi = hex_digit(text[3 * i]);
    int lo = hex_digit(text[3 * i + 1]);
    if (hi < 0 || lo < 0 || (i < 5 && text[3 * i + 2] != ':')) return std::nullopt;
    mac[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return mac;
}

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  auto count = parse_decimal(text.substr(0, digits), 20);
  if (!count) return std::nullopt;
  std::string_view suffix = text.substr(digits);
  if (!suffix.empty() && suffix.front() == ' ') suffix.remove_prefix(1);
  uint64_t unit = 1;
  if (!suffix.empty()) {
    const Unit* found = nullptr;
    for (const Unit& u : kUnits) {
      if (u.suffix == suffix) found = &u;
    }
    if (found == nullptr) return std::nullopt;
    unit = found->bytes;
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(*count, unit, &bytes)) return std::nullopt;
  return bytes;
}

std::string format_ipv4(uint32_t addr) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 0xff, (addr >> 8) & 0xff, addr & 0xff);
  return buf;
}

std::string format_prefix(const Ipv4Prefix& p) { return format_ipv4(p.addr) + "/" + std::to_string(p.prefix_len); }

std::string format_mac(const MacAddr& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
  return buf;
}

std::string format_size(uint64_t bytes) {
  static constexpr std::array<std::string_view, 4> kBinary{"TiB", "GiB", "MiB", "KiB"};
  for (size_t i = 0; i < kBinary.size(); ++i) {
    uint64_t unit = 1ull << (10 * (kBinary.size() - i));
    if (bytes != 0 && bytes % unit == 0) return std::to_string(bytes / unit) + std::string(kBinary[i]);
  }
  return std::to_string(bytes) + "B";
}

std::string_view steering_name(Steering s) {
  switch (s) {
    case Steering::automatic: return "auto";
    case Steering::flow: return "flow";
    case Steering::ring: return "ring";
  }
  return "?";
}

std::string_view mode_name(JobMode m) { return m == JobMode::ps ? "ps" : "allreduce"; }

std::string_view reduce_name(Reduce r) { return r == Reduce::mean ? "mean" : "sum"; }

std::string_view optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::sgd: return "sgd";
    case OptimizerKind::momentum: return "momentum";
    case OptimizerKind::nesterov: return "nesterov";
    case OptimizerKind::adam: return "adam";
  }
  return "?";
}

}  // namespace phub::config
