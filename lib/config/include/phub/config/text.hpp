// Text forms of config values: IPv4 addresses and prefixes, MAC addresses, sizes with units.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "phub/config/config.hpp"

namespace phub::config {

// "a.b.c.d": four decimal octets 0..255, no leading zeros beyond "0". Host byte order.
[[nodiscard]] std::optional<uint32_t> parse_ipv4(std::string_view text);
// "a.b.c.d/len" with len 0..32.
[[nodiscard]] std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view text);
// "aa:bb:cc:dd:ee:ff": six two-digit hex octets, either case.
[[nodiscard]] std::optional<MacAddr> parse_mac(std::string_view text);
// "<digits>[ ]<unit>" with unit B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000);
// a bare "<digits>" is bytes. Nullopt on bad syntax or overflow of 64 bits.
[[nodiscard]] std::optional<uint64_t> parse_size(std::string_view text);

[[nodiscard]] std::string format_ipv4(uint32_t addr);
[[nodiscard]] std::string format_prefix(const Ipv4Prefix& p);
[[nodiscard]] std::string format_mac(const MacAddr& mac);
// The largest binary unit that divides the size exactly: 32768 -> "32KiB", 1000 -> "1000B".
[[nodiscard]] std::string format_size(uint64_t bytes);

[[nodiscard]] std::string_view steering_name(Steering s);
[[nodiscard]] std::string_view mode_name(JobMode m);
[[nodiscard]] std::string_view reduce_name(Reduce r);
[[nodiscard]] std::string_view optimizer_name(OptimizerKind k);

}  // namespace phub::config
