// Stable names of opcodes, statuses and parse/build errors (used in logs and counter names).
#include "phub/proto/errors.hpp"
#include "phub/proto/header.hpp"

namespace phub::proto {

std::string_view opcode_name(Opcode op) noexcept {
  switch (op) {
    case Opcode::push: return "push";
    case Opcode::result: return "result";
    case Opcode::rerequest: return "rerequest";
    case Opcode::fwd_partial: return "fwd_partial";
    case Opcode::fwd_result: return "fwd_result";
    case Opcode::error: return "error";
    case Opcode::join: return "join";
    case Opcode::leave: return "leave";
    case Opcode::probe_request: return "probe_request";
    case Opcode::probe_reply: return "probe_reply";
    case Opcode::init: return "init";
    case Opcode::pull: return "pull";
    case Opcode::joined: return "joined";
    case Opcode::hub_state: return "hub_state";
    case Opcode::fwd_init: return "fwd_init";
    case Opcode::hparams: return "hparams";
    case Opcode::fwd_hparams: return "fwd_hparams";
  }
  return "unknown";
}

std::string_view status_name(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::round_ahead: return "round_ahead";
    case Status::round_behind: return "round_behind";
    case Status::round_stalled: return "round_stalled";
    case Status::unknown_chunk: return "unknown_chunk";
    case Status::not_initialized: return "not_initialized";
    case Status::bad_request: return "bad_request";
    case Status::epoch_mismatch: return "epoch_mismatch";
    case Status::draining: return "draining";
    case Status::hparams_unknown: return "hparams_unknown";
    case Status::hparams_mismatch: return "hparams_mismatch";
    case Status::nonfinite: return "nonfinite";
  }
  return "unknown";
}

std::string_view parse_error_name(ParseError e) noexcept {
  switch (e) {
    case ParseError::frame_too_short: return "frame_too_short";
    case ParseError::vlan_too_short: return "vlan_too_short";
    case ParseError::not_ipv4: return "not_ipv4";
    case ParseError::ipv4_bad_version: return "ipv4_bad_version";
    case ParseError::ipv4_bad_ihl: return "ipv4_bad_ihl";
    case ParseError::ipv4_bad_total_length: return "ipv4_bad_total_length";
    case ParseError::ipv4_bad_checksum: return "ipv4_bad_checksum";
    case ParseError::ipv4_fragment: return "ipv4_fragment";
    case ParseError::not_udp: return "not_udp";
    case ParseError::udp_bad_length: return "udp_bad_length";
    case ParseError::header_too_short: return "header_too_short";
    case ParseError::bad_magic: return "bad_magic";
    case ParseError::bad_version: return "bad_version";
    case ParseError::bad_opcode: return "bad_opcode";
    case ParseError::bad_dtype: return "bad_dtype";
    case ParseError::bad_flags: return "bad_flags";
    case ParseError::bad_status: return "bad_status";
    case ParseError::reserved_nonzero: return "reserved_nonzero";
    case ParseError::payload_length_mismatch: return "payload_length_mismatch";
    case ParseError::elem_count_mismatch: return "elem_count_mismatch";
    case ParseError::unexpected_payload: return "unexpected_payload";
    case ParseError::bad_crc: return "bad_crc";
    case ParseError::arp_malformed: return "arp_malformed";
    case ParseError::icmp_malformed: return "icmp_malformed";
    case ParseError::icmp_bad_checksum: return "icmp_bad_checksum";
    case ParseError::bad_forward: return "bad_forward";
    case ParseError::bad_hub_state: return "bad_hub_state";
    case ParseError::count_: break;
  }
  return "unknown";
}

std::string_view build_error_name(BuildError e) noexcept {
  switch (e) {
    case BuildError::buffer_too_small: return "buffer_too_small";
    case BuildError::payload_too_large: return "payload_too_large";
    case BuildError::elem_count_mismatch: return "elem_count_mismatch";
  }
  return "unknown";
}

}  // namespace phub::proto
