// Names of the drop counters.
#include "phub/engine/counters.hpp"

namespace phub::engine {

std::string_view drop_name(Drop d) noexcept {
  switch (d) {
    case Drop::not_for_us: return "not_for_us";
    case Drop::rx_scattered: return "rx_scattered";
    case Drop::udp_checksum_bad: return "udp_checksum_bad";
    case Drop::non_ip: return "non_ip";
    case Drop::ip_other_protocol: return "ip_other_protocol";
    case Drop::unknown_port: return "unknown_port";
    case Drop::unknown_job: return "unknown_job";
    case Drop::job_port_mismatch: return "job_port_mismatch";
    case Drop::bad_tag: return "bad_tag";
    case Drop::bad_rank: return "bad_rank";
    case Drop::source_not_allowed: return "source_not_allowed";
    case Drop::rate_limited: return "rate_limited";
    case Drop::bad_chunk: return "bad_chunk";
    case Drop::wrong_owner: return "wrong_owner";
    case Drop::bad_segment: return "bad_segment";
    case Drop::dtype_mismatch: return "dtype_mismatch";
    case Drop::round_ahead: return "round_ahead";
    case Drop::round_behind: return "round_behind";
    case Drop::not_initialized: return "not_initialized";
    case Drop::bad_request: return "bad_request";
    case Drop::unexpected_opcode: return "unexpected_opcode";
    case Drop::ring_full: return "ring_full";
    case Drop::tx_full: return "tx_full";
    case Drop::no_mbuf: return "no_mbuf";
    case Drop::epoch_mismatch: return "epoch_mismatch";
    case Drop::count_: break;
  }
  return "unknown";
}

}  // namespace phub::engine
