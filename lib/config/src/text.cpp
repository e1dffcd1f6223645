// Parsing and formatting of the text forms of config values (sizes, enumeration names).
#include "phub/config/text.hpp"

#include <array>
#include <charconv>

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

std::string_view udp_checksum_name(UdpChecksum u) { return u == UdpChecksum::trust ? "trust" : "verify"; }

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
