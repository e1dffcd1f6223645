// The one table of the data plane's counters. Every counter is declared once below, with its help text;
// the structs, the sums over lcores, the text, JSON, telemetry and Prometheus outputs are all generated
// from these tables. A counter has a single writer (its lcore) and is read by the control thread without
// tearing: the writer stores with a relaxed atomic store, the reader loads with a relaxed atomic load
// (plain 64-bit moves on x86).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "phub/proto/errors.hpp"
#include "phub/proto/header.hpp"

namespace phub::engine {

// Why a received packet was not used. Reasons a job is known for are counted per job; the others per lcore.
// Malformed frames are counted by proto::ParseError instead.
#define PHUB_DROPS(X)                                                                                          \
  X(not_for_us, "destination MAC or IPv4 address is not the port's")                                        \
  X(rx_scattered, "a multi-segment frame that could not be linearised")                                     \
  X(udp_checksum_bad, "the UDP checksum is wrong (the PMD's verdict, or checked in software)")                                                          \
  X(non_ip, "neither IPv4 nor ARP")                                                                         \
  X(ip_other_protocol, "IPv4, but neither UDP nor ICMP echo")                                               \
  X(reply_source_refused, "ARP request or ICMP echo from a multicast/broadcast MAC or a 0.0.0.0, multicast or "  \
                          "broadcast IPv4 source (not answered)")                                           \
  X(reply_rate_limited, "ARP request or ICMP echo over the port's limits.arp_icmp_per_s (not answered)")    \
  X(unknown_port, "a UDP port no job listens on")                                                           \
  X(unknown_job, "the header's job id is not configured")                                                   \
  X(job_port_mismatch, "the header's job id is not the job of the UDP port")                                \
  X(bad_tag, "the authentication tag is wrong for the job's secret")                                        \
  X(bad_rank, "rank outside 0..workers-1")                                                                  \
  X(source_not_allowed, "source outside the job's allowed_sources, or not the rank's pinned worker_ipv4")   \
  X(rate_limited, "over the job's packets-per-second limit")                                                \
  X(answer_rate_limited, "a result not sent in answer to a request: over the job's answer_bytes_per_s")       \
  X(bad_chunk, "chunk id outside the job")                                                                  \
  X(wrong_owner, "chunk not owned by the lcore of the UDP port it was sent to")                             \
  X(bad_segment, "element range is not one of the chunk's segments")                                        \
  X(dtype_mismatch, "pushed dtype differs from the job's")                                                  \
  X(round_ahead, "push beyond the chunk's round (answered)")                                                \
  X(round_behind, "push older than the kept result (answered)")                                             \
  X(not_initialized, "ps push before rank 0's init (answered)")                                             \
  X(bad_request, "opcode or rank not valid here, e.g. init from rank != 0 (answered)")                      \
  X(unexpected_opcode, "an opcode a server never receives (result, error, joined, hub forwards, ...)")      \
  X(epoch_mismatch, "the packet's epoch is not the job's: a restarted job's old workers (answered)")        \
  X(draining, "a push that would start a round of a drained job (answered)")                                \
  X(advance_pending, "a push or rerequest for another round while a chunk's advance waits for a buffer")      \
  X(ring_full, "the hand-off ring to the owning lcore was full")                                            \
  X(handoff_share_full, "the job already held its share of the hand-off ring slots to the owning lcore")    \
  X(tx_full, "the transmit queue stayed full")                                                              \
  X(tx_share_full, "a reply not sent: the job already held its share of the lcore's transmit buffer slots")   \
  X(no_mbuf, "mempool empty when building a reply")                                         \
  X(unproven_limit, "a message not sent: its address has not proven it receives there (no cookie) and "      \
                    "has not sent as many bytes as the message has")                                                  \
  X(rank_elsewhere, "hierarchical job: a packet of a rank that ranks_by_rack puts in another rack")          \
  X(fwd_bad_mac, "hub forward: the payload MAC (or the tag under it) is wrong, e.g. under another life's link key")                              \
  X(fwd_bad_rack, "hub forward: rank is not another rack's index (partial), not this hub's (result), or not rank 0's (init)") \
  X(fwd_wrong_source, "hub forward: not from the sending rack's hub_ipv4 and its UDP port for the lcore")    \
  X(fwd_not_home, "hub forward: a partial or init for a chunk homed elsewhere, or a result for one homed here") \
  X(fwd_bad_piece, "hub forward: the element range is not a piece (partial) or segment (result) of the chunk") \
  X(fwd_stale, "hub result for another round, or for a segment this rack has not forwarded")                \
  X(hub_unresolved, "a forward not sent: the peer hub's MAC address is not known yet (ARP asked)")         \
  X(fwd_peer_unverified, "hub forward from a peer hub no fresh hub_state has come from yet (fingerprint unknown)") \
  X(fwd_fingerprint_mismatch, "hub forward from a peer hub whose hierarchy fingerprint differs from this hub's") \
  X(hub_state_stale, "hub_state that echoes no nonce of this lcore's, an older epoch of rank 0's hub, or a nonce of " \
                     "an older life of a live peer: a replay") \
  X(replayed, "sessions job: a session packet (or a holder's confirming join) whose sequence number was seen already")  \
  X(bad_mac, "sessions job: a session packet whose tag is right but whose payload MAC is not")               \
  X(mac_missing, "payload_mac job: a push, init (or result) session packet without its payload MAC")        \
  X(session_replaced, "sessions job: a packet of a rank's former session (a later join replaced it)")       \
  X(no_session, "sessions job: an answer not sent, the rank has no established session (or a packet opened under none)") \
  X(hparams_unknown, "ps push whose round starts with a hyperparameter set this lcore does not hold (answered: register it)") \
  X(hparams_mismatch, "ps push naming another hyperparameter set than the round's other ranks (answered)")  \
  X(hparams_refused, "ps hyperparameter set malformed, under another id, or not for the job's optimizer (answered)") \
  X(nonfinite_refused, "a push with NaN or Inf its rank did not declare, under nonfinite = refuse (answered)") \
  X(join_stale, "a confirming join whose challenge this lcore did not send to its source in the job's current epoch " \
                "and server run: a replay, or a confirm overtaken by an epoch start (answered with a fresh challenge)") \
  X(fwd_replayed, "hub forward whose number the link has seen already (or behind its window): a replay")      \
  X(fwd_link_unready, "a forward not sent: no fresh hub_state exchange with the peer hub yet (no link keys)")

// Per (lcore, job, peer hub) of a hierarchical job: what one lcore counted of another rack's hub
// (docs/hierarchy.md, "Reachability"). The report sums them over the lcores; every output lists them from here.
#define PHUB_HUB_PEER_COUNTERS(X)                                                                           \
  X(partials_sent, "fwd_partial pieces sent to the peer hub as the chunks' home, resends included")        \
  X(partials_retransmitted, "of those, resends")                                                          \
  X(partials_received, "verified partial pieces from the peer hub that fit a chunk homed here")           \
  X(results_received, "verified fwd_results from the peer hub that fit a segment of its chunk")           \
  X(states_received, "fresh hub_state messages from the peer hub (they echoed this lcore's nonce)")

enum class Drop : uint8_t {
#define PHUB_X(name, help) name,
  PHUB_DROPS(PHUB_X)
#undef PHUB_X
  count_,
};
inline constexpr size_t kDropCount = static_cast<size_t>(Drop::count_);

[[nodiscard]] std::string_view drop_name(Drop d) noexcept;
// The name of a slot of rx_messages / tx_messages: the opcode's, "other" for slot 0.
[[nodiscard]] std::string_view message_slot_name(size_t slot) noexcept;
[[nodiscard]] std::string_view drop_help(Drop d) noexcept;

// Per lcore: traffic and the loop.
#define PHUB_LCORE_COUNTERS(X)                                                                 \
  X(rx_packets, "frames received from the lcore's queues")                                    \
  X(rx_bytes, "bytes of those frames")                                                        \
  X(tx_packets, "frames handed to the ports' transmit queues")                               \
  X(tx_bytes, "bytes of those frames")                                                        \
  X(arp_replies, "ARP requests for the port's address answered")                              \
  X(icmp_replies, "ICMP echo requests answered")                                              \
  X(redirected_out, "frames handed to the owning lcore through its ring")                    \
  X(redirected_in, "frames received from another lcore's ring")                              \
  X(accepted, "frames a handler took: summed, answered, learnt from, or a duplicate answered again")        \
  X(frames_dropped, "frames dropped for a named reason (drops) or malformed")                              \
  X(unaccounted, "frames no handler named an outcome for (0 unless a path is missed: every frame is "        \
                 "accepted, dropped or handed off)")                                                        \
  X(results_copied, "result payloads copied into their frames (ports[].tx_copy, or a port that cannot send chains)")    \
  X(idle_sleeps, "short sleeps after a run of empty polls")                                   \
  X(loops, "main loop iterations")                                                            \
  X(busy_loops, "iterations that found work")                                                 \
  X(busy_tsc, "TSC cycles in iterations that found work")                                     \
  X(total_tsc, "TSC cycles since the loop started")                                           \
  X(stage_samples, "pushes timed by stage: one frame in 61 that the lcore takes, when it is a push it sums") \
  X(stage_parse_tsc, "TSC cycles of the timed pushes from the handler's start to their phub header parsed")  \
  X(stage_gate_tsc, "... in the job's gate (or taking the verdict a handed-off frame carries)")              \
  X(stage_sum_tsc, "... in the push's handler but its seals and transmit bursts: the sum, the round's "     \
                   "bookkeeping, results queued")                                                         \
  X(stage_seal_tsc, "... signing or sealing the results they completed (tags, session seals, payload MACs)") \
  X(tx_burst_tsc, "TSC cycles in the ports' transmit bursts, all of them (per frame sent: / tx_packets)")     \
  X(max_gap_tsc, "longest time between two quiescent states of the loop, in TSC cycles")    \
  X(max_checkpoint_work_ns, "most CPU time one loop iteration spent on checkpoint copies (thread time: "     \
                            "preemption excluded), in ns")                                     \
  X(checkpoint_work_over_100us, "loop iterations whose checkpoint copies took over 100 us of CPU time")  \
  X(requests, "requests from the control thread handled")

// Per (lcore, job): progress of the job's chunks this lcore owns.
#define PHUB_JOB_COUNTERS(X)                                                                   \
  X(pushes, "contributions accepted")                                                         \
  X(push_payload_bytes, "their payload: the aggregated gradient goodput")                     \
  X(duplicates, "contributions already counted this round (ignored)")                        \
  X(retransmits_seen, "packets with the retransmit flag")                                     \
  X(segments_completed, "segments with every contribution")                                   \
  X(rounds_completed, "chunk rounds completed")                                               \
  X(results_sent, "result packets, resends included")                                        \
  X(results_resent, "answers to rerequests and late duplicates")                              \
  X(rerequests, "rerequest packets")                                                          \
  X(errors_sent, "error packets")                                                             \
  X(stalls_reported, "rounds reported stalled")                                               \
  X(advances_deferred, "round advances deferred: the previous result was still being sent, no spare free") \
  X(inits, "ps init segments accepted")                                                       \
  X(pulls, "ps pull requests")                                                                \
  X(joins, "join requests")                                                                   \
  X(joins_redirected, "interface_map: joins for another lcore that reached this one at another port than that lcore's home, answered here with the home's address (a redirect) instead of handed over") \
  X(joins_rechallenged, "confirms of a challenge made in the epoch that a run's start just replaced: answered with the challenge of now, as a first join") \
  X(addresses_proven, "ranks' addresses proven by their address cookie")                     \
  X(off_interface, "interface_map: pushes, inits, rerequests and pulls of this lcore's chunks that reached another port than its home (a worker that sends every chunk to one address)") \
  X(addresses_kept, "packets of a rank from another address than its proven one, which moves only by a fresh join") \
  X(sessions_established, "sessions job: sessions promoted by their first authentic packet after the join") \
  X(leaves, "leave requests")                                                                 \
  X(epochs_started, "epochs started: a new run's rank 0 or the operator reset the rounds")      \
  X(resets, "rounds reset by the operator (phub-ctl reset)")                                  \
  X(checkpoint_chunks_copied, "chunk states copied for a checkpoint at their round boundary")   \
  X(checkpoints_written, "checkpoint files written (by the control thread; in lcore index 0's row)") \
  X(checkpoints_failed, "checkpoints that failed: no boundary reached, a new epoch, or the write (control thread)") \
  X(checkpoints_nonfinite, "checkpoints refused: the captured state held NaN or Inf (the clean files are kept)") \
  X(checkpoints_superseded, "checkpoint files set aside (*.superseded) when a fresh-weights run started (control thread)") \
  X(partials_sent, "hierarchical: fwd_partial pieces sent to chunks' home hubs, retransmits included")   \
  X(partials_retransmitted, "hierarchical: fwd_partial pieces sent again, no fwd_result within the backoff") \
  X(partials_received, "hierarchical: other racks' partial pieces counted at this home")                    \
  X(forwards_copied, "hierarchical: forwards whose payload was copied (sum not in a result buffer, or the port cannot chain)") \
  X(hub_results_sent, "hierarchical: fwd_result segments sent to other racks' hubs, resends included")      \
  X(hub_results_received, "hierarchical: fwd_result segments from home hubs that completed a segment here") \
  X(hub_results_resent, "hierarchical home: fwd_result segments sent again, answering a resent partial of a complete segment") \
  X(resends_postponed, "hierarchical: chunks' partial resends put off, the home's results still arriving within the backoff") \
  X(hub_states_sent, "hierarchical: hub_state messages sent to peer hubs (epoch, fingerprint, keep-alive)")   \
  X(hub_states_received, "hierarchical: fresh hub_state messages received (they echoed this lcore's nonce)")  \
  X(hub_links_keyed, "hierarchical: forward keys derived for a peer hub's link (a nonce of either end taken)") \
  X(hub_epochs_adopted, "hierarchical: epochs (or rank 0 holders) taken from rank 0's hub")                    \
  X(inits_forwarded, "hierarchical ps: rank 0's init segments forwarded to the chunks' home hubs (fwd_init)") \
  X(weights_requested, "hierarchical ps: header-only fwd_init requests for a chunk's weights sent to its home") \
  X(weights_sent, "hierarchical ps home: fwd_result segments answering a forwarded init or a weights request") \
  X(weights_received, "hierarchical ps: weight segments from home hubs stored here before the first round")  \
  X(hparams_registered, "ps: hyperparameter sets registered (hparams messages taken, repeats included)")       \
  X(nonfinite_declared, "ps: pushes whose rank declared its step non-finite")                                  \
  X(rounds_skipped, "ps: chunk rounds that updated nothing: a rank declared them non-finite")                 \
  X(nonfinite_passed, "pushes with undeclared NaN or Inf taken (nonfinite = pass): summed, or in ps a skipped round") \
  X(nonfinite_sums, "allreduce: result segments holding NaN or Inf (sent as they are)")                        \
  X(state_inits, "ps: optimizer state pieces set by init (PSOptimizer.load_state_dict)")                      \
  X(round_latency_sum_ns, "sum of the completed rounds' latencies, first push to last result")

// Round latency histogram: a round's time from its first contribution to its completion. Upper bounds in
// microseconds; the last bucket is everything above the one before.
inline constexpr std::array<uint64_t, 14> kLatencyBoundsUs = {50,    100,   250,    500,    1000,   2500,   5000,
                                                              10000, 25000, 50000, 100000, 250000, 500000, 1000000};
inline constexpr size_t kLatencyBuckets = kLatencyBoundsUs.size() + 1;

// Loop gap histogram: the time between two quiescent states of an lcore's loop (idle sleeps excluded), the
// longest the lcore made anything wait, e.g. while it served a reload. Upper bounds in microseconds.
inline constexpr std::array<uint64_t, 10> kGapBoundsUs = {5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000};
inline constexpr size_t kGapBuckets = kGapBoundsUs.size() + 1;

// phub messages by opcode, per lcore (docs/server.md, "Counters"): received, counted once by the lcore that
// handled the message (after a hand-off, its owner) once its header parsed; and sent, counted when the port
// took the frame. Indexed by opcode value; slot 0 holds the frames sent that are not phub messages (ARP and
// ICMP answers, and a probe answer to a VLAN-tagged probe). A capture of the port shows the same numbers.
inline constexpr size_t kOpcodeSlots = size_t{proto::kOpcodeMax} + 1;

struct alignas(64) LcoreCounters {
#define PHUB_X(name, help) uint64_t name = 0;
  PHUB_LCORE_COUNTERS(PHUB_X)
#undef PHUB_X
  std::array<uint64_t, kGapBuckets> loop_gaps{};  // loop iterations per gap bucket (not cumulative)
  std::array<uint64_t, kDropCount> drops{};  // reasons no job is known for
  std::array<uint64_t, proto::kParseErrorCount> malformed{};
  std::array<uint64_t, kOpcodeSlots> rx_messages{};  // by opcode (see kOpcodeSlots)
  std::array<uint64_t, kOpcodeSlots> tx_messages{};
};

struct alignas(64) JobCounters {
#define PHUB_X(name, help) uint64_t name = 0;
  PHUB_JOB_COUNTERS(PHUB_X)
#undef PHUB_X
  std::array<uint64_t, kDropCount> drops{};  // reasons counted against this job
  std::array<uint64_t, kLatencyBuckets> round_latency{};  // rounds per latency bucket (not cumulative)
};

// A field of one of the structs above, for everything that walks the table.
template <class S>
struct CounterField {
  std::string_view name;
  std::string_view help;
  uint64_t S::*member;
};

inline constexpr CounterField<LcoreCounters> kLcoreFields[] = {
#define PHUB_X(name, help) {#name, help, &LcoreCounters::name},
    PHUB_LCORE_COUNTERS(PHUB_X)
#undef PHUB_X
};
inline constexpr CounterField<JobCounters> kJobFields[] = {
#define PHUB_X(name, help) {#name, help, &JobCounters::name},
    PHUB_JOB_COUNTERS(PHUB_X)
#undef PHUB_X
};

// The writer's increment (only the owning lcore writes a counter).
inline void bump(uint64_t& c, uint64_t n = 1) noexcept { __atomic_store_n(&c, c + n, __ATOMIC_RELAXED); }
inline void set_max(uint64_t& c, uint64_t v) noexcept {
  if (v > c) __atomic_store_n(&c, v, __ATOMIC_RELAXED);
}
// The reader's load (any thread).
[[nodiscard]] inline uint64_t load(const uint64_t& c) noexcept { return __atomic_load_n(&c, __ATOMIC_RELAXED); }

// Lcore counters that hold a maximum (a gauge), not a count: the sum over lcores takes their maximum.
[[nodiscard]] constexpr bool is_max_counter(std::string_view name) noexcept {
  return name == "max_gap_tsc" || name == "max_checkpoint_work_ns";
}

// Adds a consistent-per-field copy of `from` (read with load()) into `into`; is_max_counter() fields take the
// maximum.
void accumulate(LcoreCounters& into, const LcoreCounters& from) noexcept;
void accumulate(JobCounters& into, const JobCounters& from) noexcept;

// The latency bucket of a round that took `us` microseconds.
[[nodiscard]] size_t latency_bucket(uint64_t us) noexcept;

}  // namespace phub::engine
