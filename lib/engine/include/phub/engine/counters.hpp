// Named counters of the data plane: every drop reason, per-lcore traffic, per-job progress.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phub/proto/errors.hpp"

namespace phub::engine {

// Why a received packet was not used. Malformed phub headers are counted by proto::ParseError instead.
enum class Drop : uint8_t {
  not_for_us,          // destination MAC or IPv4 address is not ours
  rx_scattered,        // a multi-segment frame that could not be linearised
  udp_checksum_bad,    // the NIC flagged a bad UDP checksum
  non_ip,              // neither IPv4 nor ARP
  ip_other_protocol,   // IPv4 but neither UDP nor ICMP echo
  unknown_port,        // UDP port outside every job's range
  unknown_job,         // header job id not configured
  job_port_mismatch,   // header job id is not the job of the UDP port
  bad_tag,             // authentication tag wrong for the job's secret
  bad_rank,            // rank outside 0..workers-1
  source_not_allowed,  // source outside the job's allowed_sources, or not the rank's pinned worker_ipv4
  rate_limited,        // over the job's packets-per-second limit
  bad_chunk,           // chunk id outside the job
  wrong_owner,         // chunk not owned by the lcore of the UDP port it was sent to
  bad_segment,         // element range is not one of the chunk's segments
  dtype_mismatch,      // pushed dtype differs from the job's
  round_ahead,         // answered with an error packet
  round_behind,        // answered with an error packet
  not_initialized,     // ps push before init; answered with an error packet
  bad_request,         // opcode or rank not valid here (e.g. init from rank != 0); answered
  unexpected_opcode,   // an opcode a server never receives (result, fwd_result, error, probe_reply)
  ring_full,           // hand-off to the owning lcore failed
  tx_full,             // transmit queue stayed full
  no_mbuf,             // mempool empty when building a reply
  epoch_mismatch,      // the packet's epoch is not the job's (a restarted job's old workers); answered
  count_,
};

inline constexpr size_t kDropCount = static_cast<size_t>(Drop::count_);

[[nodiscard]] std::string_view drop_name(Drop d) noexcept;

// Written only by the owning lcore; read (racily, 64-bit loads) by the control thread for stats.
struct alignas(64) LcoreCounters {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t arp_replies = 0;
  uint64_t icmp_replies = 0;
  uint64_t redirected_out = 0;   // handed to the owning lcore through its ring
  uint64_t redirected_in = 0;    // received from another lcore's ring
  uint64_t results_copied = 0;   // result payload copied because the port cannot send chained mbufs
  uint64_t idle_sleeps = 0;
  uint64_t loops = 0;
  uint64_t busy_loops = 0;  // loop iterations that found work (rx_packets / busy_loops: mean RX burst)
  uint64_t busy_tsc = 0;   // TSC cycles spent in loop iterations that found work
  uint64_t total_tsc = 0;  // TSC cycles since the loop started
  std::array<uint64_t, kDropCount> drops{};
  std::array<uint64_t, proto::kParseErrorCount> malformed{};
};

// Per (lcore, job); summed over lcores for a job's totals.
struct alignas(64) JobCounters {
  uint64_t pushes = 0;             // accepted contributions
  uint64_t push_payload_bytes = 0; // their payload: the aggregated gradient goodput
  uint64_t duplicates = 0;         // contribution already counted this round (ignored)
  uint64_t retransmits_seen = 0;   // packets with the retransmit flag
  uint64_t segments_completed = 0;
  uint64_t rounds_completed = 0;   // chunk rounds
  uint64_t results_sent = 0;       // result packets (including resends)
  uint64_t results_resent = 0;     // answers to re-requests and late duplicates
  uint64_t rerequests = 0;
  uint64_t errors_sent = 0;
  uint64_t stalls_reported = 0;
  uint64_t results_reused_busy = 0;  // no spare result buffer: a still-referenced one was reused
  uint64_t inits = 0;
  uint64_t pulls = 0;
  uint64_t joins = 0;
  uint64_t epochs_started = 0;   // restarts of the job by its rank 0 (rounds reset)
  uint64_t leaves = 0;
};

}  // namespace phub::engine
