// The handler of one job on one lcore (private to lib/engine): it holds the job's plan and the lcore's state
// of the job (LcoreJob), and runs every phub message of the job that passed the lcore's gate, from the
// opcode's entry in a table (handle). It sends through the lcore's transmit buffers and names what became
// of the frame (LcoreIo). A handler is a view made where it is needed (per frame, per timer tick): it owns
// no state of its own, so a reload that replaces the plan needs nothing of it.
//
// Where a push goes: Lcore::route_frame and its gate (rx.cpp, gate.cpp) -> handle, its table and on_data
// (job_handler.cpp) -> the round's steps (round.cpp: take_push, which sums through chunk.cpp's contribute,
// complete_segment, finish_round, try_advance) -> the results out (tx.cpp).
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <span>

#include "phub/engine/job_plan.hpp"
#include "lcore_io.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/engine/requests.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/header.hpp"
#include "rx_frame.hpp"

namespace phub::engine {

class Forwarder;

class JobHandler {
 public:
  JobHandler(LcoreIo& lcore_io, const JobPlan& job_plan, LcoreJob& job) noexcept
      : io(lcore_io), plan(job_plan), lj(job) {}

  // What the lcore calls.
  // A phub message of the job that passed the gate on this lcore (Lcore::pass_gate), from its frame `m`.
  void handle(rte_mbuf* m, RxFrame& rx) noexcept;
  // The gate's answer to a join for another lcore that reached this one (Lcore::pass_gate) at another port
  // than that lcore's home (GateAnswer::redirect): a joined naming the home's address
  // (session_option::redirect), sent here instead of a hand-off. Frees m.
  void redirect_join(rte_mbuf* m, const RxFrame& rx) noexcept;
  // The lcore's 1 ms tick (Lcore::scan_stalls), at most kChunksPerTick chunks on from the last: a round stalled
  // for `round_stall_tsc` (0: never) is reported to its ranks; a hierarchical job's peer hubs are resolved and
  // told the job's state, and the pieces due are sent again.
  void on_tick(uint64_t now, uint64_t round_stall_tsc) noexcept;
  static constexpr uint32_t kChunksPerTick = 256;
  // The control thread's requests (Lcore::serve_requests).
  // Rank 0 restarted the job: every chunk this lcore owns starts again at round 0 of `epoch`.
  void start_epoch(uint16_t epoch, bool fresh_weights) noexcept;
  // Checkpoints (lcore_checkpoint.cpp), copy-on-write per segment: arm a capture of the job's chunks
  // after req.round; a chunk opens for copying once it is at that boundary (open_capture, as it completes
  // the round); a segment's slice of the state is copied before a packet of the next round reaches that
  // segment (capture_segment), the rest in the background (copy_capture_slice); forget the capture. Each adds
  // its thread CPU time to the lcore's checkpoint_work_ns.
  void arm_capture(const Request& req) noexcept;
  void detach_capture() noexcept;
  // The background copy of the job's capture in one loop iteration: at most kCaptureBytesPerIteration, from
  // at most kCaptureChunksPerIteration chunks, where the last iteration stopped.
  void copy_capture_slice() noexcept;
  static constexpr size_t kCaptureBytesPerIteration = 16 * 1024;
  static constexpr uint32_t kCaptureChunksPerIteration = 64;

 private:
  // handle's table (job_handler.cpp): an opcode's entry says how far its message goes through the checks
  // (admit) and names its handler. Hub messages name a rack, not a rank: none of the rank checks; a join is
  // charged to the job's rate before its rank holds an epoch or an address; a probe skips the epoch check
  // and may not spend what results to an unproven address need; every other message passes them all.
  enum class Admission : uint8_t { hub, join, probe, rank };
  struct Route {
    void (JobHandler::*handler)(RxFrame& rx) noexcept = nullptr;
    Admission admission = Admission::rank;
  };
  static const std::array<Route, proto::kOpcodeMax + 1> kRoutes;
  // The checks of `admission` on a message of a rank: its session opened (sessions jobs), the job's rate, its
  // epoch, its address (followed, kept or proven). False when the message goes no further (counted).
  bool admit(RxFrame& rx, Admission admission) noexcept;
  void on_probe(RxFrame& rx) noexcept;  // an echo of the frame, rewritten in place (or it is freed)
  void on_leave(RxFrame& rx) noexcept;

  // Data and requests (job_handler.cpp): a push or init checked and handed to the round, a rerequest or pull
  // answered.
  void on_data(RxFrame& rx) noexcept;
  void on_rerequest(RxFrame& rx) noexcept;

  // The round's steps (round.cpp).
  // A push that passed on_data's checks into segment `seg` of `c`'s round: contributed, then what
  // its outcome sends (the segment's result, the rack's partial, a result again, an error).
  void take_push(const RxFrame& rx, Chunk& c, uint32_t seg, const RoundIntent& intent) noexcept;
  // Segment `seg` of the current round has its result in out[cur]: to this rack's workers, and from a home
  // to every other rack's hub.
  void complete_segment(Chunk& c, uint32_t seg) noexcept;
  // Every segment of `c`'s round has its result: the round is counted (its latency too), opens the chunk to an
  // armed capture, and advances (try_advance).
  void finish_round(Chunk& c) noexcept;
  // A chunk's round in progress ended (completed, or dropped by a restart): one open round less.
  void close_round() noexcept { __atomic_store_n(&lj.open_rounds, lj.open_rounds - 1, __ATOMIC_RELAXED); }
  // Before out[cur ^ 1] of `c` is overwritten: send what still points at it, else swap in a spare.
  // False when a transmit still points at it and no spare is free: it must not be overwritten yet.
  [[nodiscard]] bool release_previous(Chunk& c) noexcept;
  // Advances a completed round once its previous result buffer can be reused; otherwise marks the chunk
  // advance_pending (a later push retries). Never overwrites a buffer a transmit still points at.
  bool try_advance(Chunk& c) noexcept;
  // A chunk whose advance is deferred answers only packets of its completed round (from that round's
  // buffer): one for the next round waits (dropped unanswered; its worker resends it), an older one is a
  // late copy that every rank is past (dropped). Returns true when it dropped the packet.
  bool deferred(const RxFrame& rx, Chunk& c) noexcept;

  // The handshake and the ranks' addresses (join.cpp).
  void on_join(RxFrame& rx) noexcept;
  // The challenge this lcore sends the join in rx when the job's epoch is `epoch` (proto::join_challenge).
  [[nodiscard]] proto::SessionNonce challenge_for(const RxFrame& rx, uint16_t epoch) const noexcept;
  // A confirming join of the rank's holder, its challenge checked: the rank's session (sessions jobs) or
  // address becomes the confirm's. A resend of the confirm that did so changes nothing; an earlier confirm of
  // the same process (its seq) is refused: false, counted replayed.
  bool take_confirm(const RxFrame& rx, Peer& p) noexcept;
  // The joined answer to a join: header `h`, payload `p`, sealed under the handshake key the join verified
  // with, to the join's source.
  bool send_joined(const RxFrame& rx, proto::Header h, const proto::JoinedPayload& p) noexcept;
  // A session packet of a sessions job: opened under the rank's current session, else under the former one
  // (an epoch_mismatch answer at most). True when it opened under current (rx.session); otherwise counted,
  // and answered only as said.
  bool open_session(RxFrame& rx) noexcept;
  // A packet from `peer`'s current address while it is unproven: its cookie proves the address, else its
  // bytes become credit for what may be sent there.
  void prove_or_credit(Peer& peer, RxFrame& rx) noexcept;

  // What the handlers send (tx.cpp).
  // A header mbuf with Ethernet/IPv4/UDP and phub headers for a message to `peer`; payload_bytes follow.
  rte_mbuf* start_message(Peer& peer, const proto::Header& h, PeerSession* session = nullptr) noexcept;
  // The same into a given mbuf (freed on failure).
  bool write_message(rte_mbuf* m, Peer& peer, const proto::Header& h, PeerSession* session = nullptr,
                     std::span<const std::byte> payload = {}) noexcept;
  // Appends the frame headers to `m` and writes its Ethernet/IPv4/UDP part for `udp_payload_bytes`; returns
  // where the phub header goes, or null (m freed) when the mbuf has no room.
  // The UDP source port is this lcore's (port_base + index), or `src_udp_port` where given (a redirect answers
  // from the port the join was sent to, another lcore's).
  std::byte* write_l234(rte_mbuf* m, Peer& peer, size_t udp_payload_bytes, uint16_t src_udp_port = 0) noexcept;
  // Sign a message to `peer` with the key its own packets carry.
  void sign_for(const Peer& peer, std::span<std::byte, proto::kHeaderBytes> wire) const noexcept;
  // Seal a written message to a rank: in a sessions job under `session` (its next number; a payload MAC of
  // `payload` for results of a payload_mac job), else with the key the rank's packets carry (sign_for).
  // False, counted no_session, when a sessions job has no valid session to seal under.
  bool seal_for(const Peer& peer, PeerSession* session, std::span<std::byte, proto::kHeaderBytes> wire,
                std::span<const std::byte> payload) noexcept;
  // Whether a frame of `frame_bytes` may go to `peer`: always once it proved its address, before only
  // against its credit (spent). Counts what it holds back.
  bool within_amplification_limit(Peer& peer, size_t frame_bytes) noexcept;
  // Result segment `seg` of buffer out[buf] of chunk `c`, labelled `round`, to `rank`, in answer to a request
  // (a rerequest, pull, init or late push): within the amplification limit and the job's answer_bytes_per_s.
  // True if it was queued.
  bool send_segment(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank) noexcept;
  // send_segment once the limits allowed it: the transmit itself. True if it was queued.
  bool transmit_segment(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank) noexcept;
  void send_segment_to_all(const Chunk& c, uint32_t seg) noexcept;
  // The mbufs of a message whose payload lies in a result buffer, to go out on port `port`: a header mbuf and
  // one that attaches the payload (zero-copy) where `may_chain` and the port chains, else one full mbuf to
  // copy into (ext null). False, counted no_mbuf, when one is missing.
  bool alloc_payload_mbufs(uint16_t port, bool may_chain, rte_mbuf*& hdr, rte_mbuf*& ext) noexcept;
  static void attach_result(rte_mbuf* ext, ResultBuf* b, size_t off_bytes, uint16_t bytes) noexcept;
  static void chain_payload(rte_mbuf* hdr, rte_mbuf* ext) noexcept;
  bool fill_result(rte_mbuf* hdr, rte_mbuf* ext, const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rank,
                   Peer& peer) noexcept;
  // A header-only answer to the sender of `rx` (errors, join acknowledgements): true if queued.
  bool reply(const RxFrame& rx, proto::Header h) noexcept;
  void send_error(const RxFrame& rx, proto::Status status, uint32_t aux) noexcept;
  void send_error_to(uint16_t rank, const Chunk& c, proto::Status status, uint32_t aux) noexcept;

  // Parameter-server jobs (ps_state.cpp).
  // ps jobs' hyperparameter sets and optimizer state (ps_state.cpp): a set registered and acknowledged; a pull
  // or init of a state array (status 1..3), piece by piece, answered with the piece as held now.
  void on_hparams(RxFrame& rx) noexcept;
  void on_state_pull(RxFrame& rx) noexcept;
  void on_state_init(RxFrame& rx) noexcept;
  Chunk* state_chunk(RxFrame& rx) noexcept;
  bool state_piece(RxFrame& rx, const Chunk& c, uint32_t& off, uint32_t& n) noexcept;
  // A message to `peer` with `h.payload_bytes` copied from `elems` (and the tail, with flag::tail), within the
  // amplification limit and the job's answer_bytes_per_s. True if queued.
  bool send_copied(Peer& peer, proto::Header h, const std::byte* elems, uint64_t tail) noexcept;

  // Checkpoint captures (lcore_checkpoint.cpp).
  void open_capture(Chunk& c) noexcept;
  void capture_segment(Chunk& c, uint32_t seg) noexcept;
  // Whether local chunk `i` is open (opening it if it is at the boundary; failing the capture if past it).
  bool capture_open(uint32_t i) noexcept;
  // Copies segment `seg` of open chunk `i` unless copied; returns the bytes copied.
  size_t copy_capture_segment(uint32_t i, uint32_t seg) noexcept;

 // Hierarchical jobs' part (forwarder.hpp): a view of this handler for the hub forwards.
  friend class Forwarder;
  [[nodiscard]] Forwarder hub() noexcept;
  // hub_state and the forwards (fwd_partial, fwd_result, fwd_init, fwd_hparams), in handle's table: to the
  // forwarder (the gate lets them through to hierarchical jobs only).
  void on_hub_message(RxFrame& rx) noexcept;

 public:  // the handler's view: the lcore, the job's plan, the lcore's state of the job
  LcoreIo& io;
  const JobPlan& plan;
  LcoreJob& lj;
};

}  // namespace phub::engine
