// Text forms of config values: sizes with units and the names of enumerations (addresses: phub/base).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "phub/config/config.hpp"

namespace phub::config {

// "<digits>[ ]<unit>" with unit B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000);
// a bare "<digits>" is bytes. Nullopt on bad syntax or overflow of 64 bits.
[[nodiscard]] std::optional<uint64_t> parse_size(std::string_view text);

// The largest binary unit that divides the size exactly: 32768 -> "32KiB", 1000 -> "1000B".
[[nodiscard]] std::string format_size(uint64_t bytes);

[[nodiscard]] std::string_view steering_name(Steering s);
[[nodiscard]] std::string_view udp_checksum_name(UdpChecksum u);
[[nodiscard]] std::string_view mode_name(JobMode m);
[[nodiscard]] std::string_view reduce_name(Reduce r);
[[nodiscard]] std::string_view optimizer_name(OptimizerKind k);

}  // namespace phub::config
