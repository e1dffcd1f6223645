// Named reasons for rejecting a packet or failing to build one.
#pragma once

#include <cstdint>
#include <string_view>

namespace phub::proto {

// Every way a received frame can be malformed. Each has a stable name for counters.
enum class ParseError : uint8_t {
  frame_too_short,
  vlan_too_short,
  not_ipv4,
  ipv4_bad_version,
  ipv4_bad_ihl,
  ipv4_bad_total_length,
  ipv4_bad_checksum,
  ipv4_fragment,
  not_udp,
  udp_bad_length,
  header_too_short,
  bad_magic,
  bad_version,
  bad_opcode,
  bad_dtype,
  bad_flags,
  bad_status,
  reserved_nonzero,
  payload_length_mismatch,  // payload_bytes disagrees with the real length
  elem_count_mismatch,      // elem_count * dtype size disagrees with payload_bytes
  unexpected_payload,       // a payload on an opcode that carries none
  bad_crc,
  arp_malformed,
  icmp_malformed,
  icmp_bad_checksum,
  bad_forward,              // a hub opcode with the crc flag, or a fwd_partial not in fp32
  bad_hub_state,            // hub_state whose payload is not kHubStateBytes, or with unknown flags or reserved bits
  count_,  // number of reasons (for counter arrays)
};

inline constexpr size_t kParseErrorCount = static_cast<size_t>(ParseError::count_);

[[nodiscard]] std::string_view parse_error_name(ParseError e) noexcept;

enum class BuildError : uint8_t {
  buffer_too_small,
  payload_too_large,
  elem_count_mismatch,
};

[[nodiscard]] std::string_view build_error_name(BuildError e) noexcept;

}  // namespace phub::proto
