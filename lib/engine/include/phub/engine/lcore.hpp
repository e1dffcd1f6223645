// One poll-mode worker lcore: it polls its RX queues and hand-off rings, aggregates the chunks it owns,
// answers ARP/ICMP, sends results, serves the control thread's requests, and reports a quiescent state
// once per loop iteration.
#pragma once

#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <optional>
#include <vector>

#include "phub/drivers/eth_port.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/requests.hpp"
#include "phub/engine/snapshot.hpp"
#include "phub/engine/socket_memory.hpp"
#include "phub/engine/tx_buffer.hpp"
#include "phub/config/queue_map.hpp"
#include "phub/base/realtime.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/handshake.hpp"

namespace phub::engine {

struct LcoreResources {
  uint16_t index = 0;       // position in Config::lcores: owner index, TX queue index, UDP port offset
  unsigned lcore_id = 0;    // EAL lcore id
  int socket = -1;          // NUMA socket of its state (config::Placement::lcore_socket; -1: any)
  std::vector<config::RxQueue> rx_queues;          // the (port index, RX queue) pairs it polls (config::QueueMap)
  // Every lcore's home port, by lcore index (config::InterfaceMap): where jobs with interface_map take its
  // chunks. This lcore's is home_ports[index]; the others' tell a join that reached the wrong port where to go.
  std::vector<uint16_t> home_ports;
  std::vector<const drivers::EthPort*> ports;      // every port, by index (TX goes anywhere)
  rte_mempool* hdr_pool = nullptr;    // header mbufs (results, errors, ARP)
  rte_mempool* ext_pool = nullptr;    // data-room-0 mbufs attached to result buffers
  rte_mempool* copy_pool = nullptr;   // full mbufs for ports that cannot chain
  std::vector<rte_ring*> inbox;       // rings other lcores hand this one its packets through
  std::vector<rte_ring*> outbox;      // outbox[owner]: ring to hand a packet to lcore `owner` (null: self)
  rte_ring* requests = nullptr;       // from the control thread (Request*)
  rte_ring* responses = nullptr;      // back to it
  const std::atomic<const Snapshot*>* snapshot = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  const std::atomic<bool>* stop = nullptr;
  uint32_t idle_polls_before_sleep = 0;
  uint32_t idle_sleep_us = 0;
};

class Lcore : public OnSocket {  // built with new (its socket) Lcore(...)
 public:
  explicit Lcore(LcoreResources r);
  Lcore(const Lcore&) = delete;  // the transmit buffers point at tx_pool_lent_
  Lcore& operator=(const Lcore&) = delete;
  // The DPDK memory an lcore's object takes on its socket with `ports` ports (the memory budget counts it):
  // the object and its per-port transmit buffers and answer buckets.
  [[nodiscard]] static uint64_t object_bytes(size_t ports) noexcept;

  // The main loop; returns when *stop becomes true. It runs under `realtime` when set (Engine::start checked
  // that its polling gives the CPU away there).
  int run() noexcept;
  void set_realtime(const std::optional<RealtimePolicy>& realtime) { realtime_ = realtime; }
  // Whether run() has started its loop (its scheduling policy set): Engine::start waits for it.
  [[nodiscard]] bool looping() const noexcept { return looping_.load(std::memory_order_acquire); }

  // The control thread serves the lcore's requests itself while the lcore does not run (before start(),
  // after stop()).
  void serve_requests_stopped(const Snapshot& s) noexcept {
    snap_ = &s;
    serve_requests(s);
    for (uint32_t i = 0; capturing_ != 0 && i < kStoppedCopiesPerCall; ++i) copy_captures(s);
  }

  [[nodiscard]] const LcoreCounters& counters() const noexcept { return counters_; }
  [[nodiscard]] const LcoreResources& resources() const noexcept { return r_; }
  // One line: lcore id, queues, owned shards per job.
  [[nodiscard]] std::string describe(const Snapshot& s) const;

 private:
  struct Rx;  // a parsed frame on its way through the handlers

  // The steps of one loop iteration (lcore.cpp), in the manner of DPDK's l3fwd.
  uint32_t poll_rx(Rx& rx, const Snapshot& s) noexcept;     // bursts from the lcore's queues
  uint32_t poll_inbox(Rx& rx, const Snapshot& s) noexcept;  // frames other lcores handed over
  void drain_tx(uint32_t work) noexcept;                    // buffered results out, on a TSC deadline
  void tick(const Snapshot& s) noexcept;                    // timers: stalled rounds, control requests
  void quiescent() noexcept;                                // RCU: nothing of older snapshots is held
  void idle(uint32_t work) noexcept;                        // back off after a run of empty polls
  void serve_requests(const Snapshot& s) noexcept;

  // `port`: index of the port the frame arrived on (0xffff: unknown).
  // `rx` is the loop's one scratch record, refilled by each frame's parse (not zeroed per frame).
  // Counts the frame under its outcome (settle).
  void handle_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept;
  void route_frame(Rx& rx, rte_mbuf* m, uint16_t port, const Snapshot& s, bool from_ring) noexcept;
  // A received frame that is done with: freed with the rest of its burst (release_consumed).
  void consume(rte_mbuf* m) noexcept {
    if (consumed_n_ == kMaxBurst) release_consumed();
    consumed_[consumed_n_++] = m;
  }
  void release_consumed() noexcept {
    rte_pktmbuf_free_bulk(consumed_, consumed_n_);
    consumed_n_ = 0;
  }
  void handle_arp(const Rx& rx, const Snapshot& s) noexcept;
  void handle_icmp(rte_mbuf* m, Rx& rx, const Snapshot& s) noexcept;
  // Whether an ARP request or ICMP echo from (src_mac, src_ip) on port `port` gets an answer: never to a
  // multicast/broadcast MAC or a 0.0.0.0, multicast or broadcast IPv4 source, and at most limits.arp_icmp_*
  // answers per port (a token bucket). Counts the refusal.
  bool may_answer(uint16_t port, const MacAddr& src_mac, uint32_t src_ip, const Snapshot& s) noexcept;
  void handle_phub(rte_mbuf* m, Rx& rx, const Snapshot& s, uint16_t job_index) noexcept;
  // The job's gate (gate.hpp) on the phub packet in rx, once per frame: on the lcore that received it, before
  // a hand-off to lcore `owner`; the owner takes the verdict the frame carries (from_ring). Fills
  // rx.previous_key and rx.join; counts a drop against the job and returns false.
  bool pass_gate(Rx& rx, const Snapshot& s, uint16_t job_index, uint16_t owner, bool from_ring) noexcept;
  // Enqueue a frame of job `job_index` that passed the gate for lcore `owner`, within the job's share of the
  // slots (else counted handoff_share_full against the job and freed), stamped with the gate's verdict; the
  // owner gives the slot back as it dequeues.
  // The gate's answer to a join for another lcore that reached this one at another port than that lcore's
  // home (GateAnswer::redirect): a joined naming the home's address (session_option::redirect), sent here
  // instead of a hand-off.
  void redirect_join(rte_mbuf* m, const Rx& rx, const Snapshot& s, uint16_t job_index) noexcept;
  void hand_off(rte_mbuf* m, const Snapshot& s, uint16_t job_index, uint16_t owner, uint16_t port_id,
                bool previous_key) noexcept;
  void give_back_handoff_slot(const rte_mbuf* m, const Snapshot& s) noexcept;
  // Queue a reply of the job on port `port` within the job's guarantee of the transmit buffers or what it
  // may borrow (else counted tx_share_full against the job and freed): true if queued.
  bool queue_tx(LcoreJob& lj, uint16_t port, rte_mbuf* m) noexcept;
  void on_data(Rx& rx, const JobPlan& plan, LcoreJob& lj, uint64_t now) noexcept;
  void on_rerequest(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  // ps jobs' hyperparameter sets and optimizer state (ps_state.cpp): a set registered and acknowledged; a pull
  // or init of a state array (status 1..3), piece by piece, answered with the piece as held now.
  void on_hparams(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  void on_state_pull(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  void on_state_init(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  Chunk* state_chunk(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  bool state_piece(Rx& rx, const JobPlan& plan, LcoreJob& lj, const Chunk& c, uint32_t& off, uint32_t& n) noexcept;
  // A message to `peer` with `h.payload_bytes` copied from `elems` (and the tail, with flag::tail), within the
  // amplification limit and the job's answer_bytes_per_s. True if queued.
  bool send_copied(const JobPlan& plan, LcoreJob& lj, Peer& peer, proto::Header h, const std::byte* elems,
                   uint64_t tail) noexcept;
  void on_join(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  // A packet from `peer`'s current address while it is unproven: its cookie proves the address, else its
  // bytes become credit for what may be sent there.
  void prove_or_credit(Peer& peer, Rx& rx, const JobPlan& plan, LcoreJob& lj, const Snapshot& s) noexcept;
  // Whether a frame of `frame_bytes` may go to `peer`: always once it proved its address, before only
  // against its credit (spent). Counts what it holds back.
  bool within_amplification_limit(LcoreJob& lj, Peer& peer, size_t frame_bytes) noexcept;
  // Sign a message to `peer` with the key its own packets carry.
  static void sign_for(const JobPlan& plan, const Peer& peer, std::span<std::byte, proto::kHeaderBytes> wire) noexcept;
  // Seal a written message to a rank: in a sessions job under `session` (its next number; a payload MAC of
  // `payload` for results of a payload_mac job), else with the key the rank's packets carry (sign_for).
  // False, counted no_session, when a sessions job has no valid session to seal under.
  bool seal_for(const JobPlan& plan, LcoreJob& lj, const Peer& peer, PeerSession* session,
                std::span<std::byte, proto::kHeaderBytes> wire, std::span<const std::byte> payload) noexcept;
  // A session packet of a sessions job: opened under the rank's current session, else under the former one
  // (an epoch_mismatch answer at most). True when it opened under current (rx.session); otherwise counted,
  // and answered only as said.
  bool open_session(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  // The challenge this lcore sends the join in rx when the job's epoch is `epoch` (proto::join_challenge).
  [[nodiscard]] proto::SessionNonce challenge_for(const Rx& rx, const JobPlan& plan, uint16_t epoch) const noexcept;
  // A confirming join of the rank's holder, its challenge checked: the rank's session (sessions jobs) or
  // address becomes the confirm's. A resend of the confirm that did so changes nothing; an earlier confirm of
  // the same process (its seq) is refused: false, counted replayed.
  bool take_confirm(const Rx& rx, const JobPlan& plan, LcoreJob& lj, Peer& p) noexcept;
  // The joined answer to a join: header `h`, payload `p`, sealed under the handshake key the join verified
  // with, to the join's source.
  bool send_joined(const Rx& rx, const JobPlan& plan, LcoreJob& lj, proto::Header h,
                   const proto::JoinedPayload& p) noexcept;
  // Rank 0 restarted the job: every chunk this lcore owns starts again at round 0 of `epoch`.
  void start_epoch(const JobPlan& plan, LcoreJob& lj, uint16_t epoch, bool fresh_weights) noexcept;
  void on_probe(rte_mbuf* m, Rx& rx, LcoreJob& lj) noexcept;
  // Checkpoints (lcore_checkpoint.cpp), copy-on-write per segment: arm a capture of the job's chunks
  // after req.round; a chunk opens for copying once it is at that boundary (open_capture, as it completes
  // the round); a segment's slice of the state is copied before a packet of the next round reaches that
  // segment (capture_segment), the rest at most kCaptureBytesPerIteration per job and loop iteration
  // (copy_captures); forget the capture. Each adds its thread CPU time to checkpoint_work_ns_.
  void arm_capture(const JobPlan& plan, LcoreJob& lj, const Request& req) noexcept;
  void open_capture(const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept;
  void capture_segment(const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;
  void copy_captures(const Snapshot& s) noexcept;
  void detach_capture(LcoreJob& lj) noexcept;
  // Whether local chunk `i` is open (opening it if it is at the boundary; failing the capture if past it).
  bool capture_open(const JobPlan& plan, LcoreJob& lj, uint32_t i) noexcept;
  // Copies segment `seg` of open chunk `i` unless copied; returns the bytes copied.
  size_t copy_capture_segment(const JobPlan& plan, LcoreJob& lj, uint32_t i, uint32_t seg) noexcept;
  // The iteration's checkpoint work into max_checkpoint_work_ns and checkpoint_work_over_100us.
  void account_checkpoint_work() noexcept;

  // Result segment `seg` of buffer out[buf] of chunk `c`, labelled `round`, to `rank`, in answer to a request
  // (a rerequest, pull, init or late push): within the amplification limit and the job's answer_bytes_per_s.
  // True if it was queued.
  bool send_segment(const JobPlan& plan, LcoreJob& lj, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                    uint16_t rank) noexcept;
  // send_segment once the limits allowed it: the transmit itself. True if it was queued.
  bool transmit_segment(const JobPlan& plan, LcoreJob& lj, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                        uint16_t rank) noexcept;
  void send_segment_to_all(const JobPlan& plan, LcoreJob& lj, const Chunk& c, uint32_t seg) noexcept;
  void send_error(const Rx& rx, const JobPlan& plan, LcoreJob& lj, proto::Status status, uint32_t aux) noexcept;
  // A header-only answer to the sender of `rx` (errors, join acknowledgements): true if queued.
  bool reply(const Rx& rx, const JobPlan& plan, LcoreJob& lj, proto::Header h) noexcept;
  void send_error_to(const JobPlan& plan, LcoreJob& lj, uint16_t rank, const Chunk& c, proto::Status status,
                     uint32_t aux) noexcept;
  void finish_round(const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept;
  // A chunk's round in progress ended (completed, or dropped by a restart): one open round less.
  static void close_round(LcoreJob& lj) noexcept { __atomic_store_n(&lj.open_rounds, lj.open_rounds - 1, __ATOMIC_RELAXED); }
  // Before out[cur ^ 1] of `c` is overwritten: send what still points at it, else swap in a spare.
  // False when a transmit still points at it and no spare is free: it must not be overwritten yet.
  [[nodiscard]] bool release_previous(LcoreJob& lj, Chunk& c) noexcept;
  // Advances a completed round once its previous result buffer can be reused; otherwise marks the chunk
  // advance_pending (a later push retries). Never overwrites a buffer a transmit still points at.
  bool try_advance(const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept;
  // A chunk whose advance is deferred answers only packets of its completed round (from that round's
  // buffer): one for the next round waits (dropped unanswered; its worker resends it), an older one is a
  // late copy that every rank is past (dropped). Returns true when it dropped the packet.
  bool deferred(const Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept;
  void scan_stalls(const Snapshot& s, uint64_t now) noexcept;

  // Hub forwards of hierarchical jobs (forward.cpp, docs/hierarchy.md).
  // A forward whose header tag passed: checked (rack, chunk, source, the peer's fingerprint, the link's keys
  // and numbering, epoch, piece), each wrong packet a counted drop, then counted into the chunk's round.
  void on_forward(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  // hub_state.cpp: the epoch and fingerprint exchange with the peer hubs of a hierarchical job.
  // Derive the link's forward keys from both nonces (none while either is unknown); its numbering and window
  // start again.
  void rekey_link(const JobPlan& plan, LcoreJob& lj, uint16_t rack) noexcept;
  void on_hub_state(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  void send_hub_states(const JobPlan& plan, LcoreJob& lj) noexcept;  // those due, on the 1 ms tick
  static void hub_state_changed(LcoreJob& lj) noexcept;               // every peer hub is told again
  void on_partial(Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg, uint16_t piece) noexcept;
  void on_hub_result(Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;
  // Segment `seg` of the current round has its result in out[cur]: to this rack's workers, and from a home
  // to every other rack's hub.
  void complete_segment(const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;
  // This rack's partial of segment `seg`, its pieces to the chunk's home; arms the resend deadline.
  void send_partial(const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg, bool retransmit) noexcept;
  // The result segment `seg` of out[buf], labelled `round`, to the hub of `rack`. False if it was not queued
  // (counted).
  [[nodiscard]] bool send_hub_result(const JobPlan& plan, LcoreJob& lj, const Chunk& c, int buf, uint32_t round, uint32_t seg,
                       uint16_t rack) noexcept;
  // One forward to the hub of `rack`: the header `h` and `h.payload_bytes` from `payload`, sealed with
  // the payload MAC. Zero-copy when `from` is the result buffer `payload` lies in and the port can chain.
  // False if it was not queued (the reason is counted as a drop).
  bool transmit_forward(const JobPlan& plan, LcoreJob& lj, uint16_t rack, proto::Header h, ResultBuf* from,
                        const std::byte* payload, std::span<const std::byte> tail = {}) noexcept;
  // Hierarchical ps (ps_state.cpp): a rack hub sends set `id` to the home of `rack` unless it acknowledged it
  // (or it went within the resend timeout); the home takes a verified fwd_hparams and acknowledges it, the rack
  // hub takes the acknowledgement.
  void send_hparams_to(const JobPlan& plan, LcoreJob& lj, uint16_t rack, uint64_t id) noexcept;
  void on_fwd_hparams(Rx& rx, const JobPlan& plan, LcoreJob& lj) noexcept;
  // Whether the hub of `rack` has a known MAC (copied into its Peer); asks ARP for it otherwise.
  bool resolve_hub(const JobPlan& plan, LcoreJob& lj, uint16_t rack) noexcept;
  // A hub's MAC seen in an ARP packet from `ip`: stored for every hierarchical job that has a hub there.
  void learn_hub_mac(const Snapshot& s, uint32_t ip, const MacAddr& mac) noexcept;
  // The stall scan's part for a rack hub: pieces still unanswered at their deadline are sent again.
  void publish_resend_timer(LcoreJob& lj, uint16_t rack) noexcept;
  void resend_forwards(const JobPlan& plan, LcoreJob& lj, Chunk& c, uint64_t now) noexcept;

  // Parameter-server jobs across racks (hub_ps.cpp, docs/hierarchy.md "Parameter-server jobs").
  // Rank 0's init of a segment of a chunk homed elsewhere: answered from the weights the home sent here, or
  // forwarded to the home (fwd_init) while this hub has none.
  void relay_init(Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;
  // A ps chunk homed elsewhere without weights here (a pull or push found it uninitialised): a header-only
  // fwd_init asks the home for them, at most once per kWeightsAskUs.
  void ask_home_for_weights(const JobPlan& plan, LcoreJob& lj, Chunk& c) noexcept;
  // At the home: a verified fwd_init, rank 0's init of segment `seg` (payload) or a request for every
  // initialised segment (no payload); answered with fwd_result segments of the newest weights.
  void on_fwd_init(Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;
  // At a rack hub: a fwd_result of the round before the chunk's current one, the home's weights.
  void on_hub_weights(Rx& rx, const JobPlan& plan, LcoreJob& lj, Chunk& c, uint32_t seg) noexcept;

  // A header mbuf with Ethernet/IPv4/UDP and phub headers for a message to `peer`; payload_bytes follow.
  rte_mbuf* start_message(const JobPlan& plan, LcoreJob& lj, Peer& peer, const proto::Header& h,
                          PeerSession* session = nullptr) noexcept;
  // The same into a given mbuf (freed on failure).
  bool write_message(rte_mbuf* m, const JobPlan& plan, LcoreJob& lj, Peer& peer, const proto::Header& h,
                     PeerSession* session = nullptr, std::span<const std::byte> payload = {}) noexcept;
  // Appends the frame headers to `m` and writes its Ethernet/IPv4/UDP part for `udp_payload_bytes`; returns
  // where the phub header goes, or null (m freed) when the mbuf has no room.
  // The UDP source port is this lcore's (port_base + index), or `src_udp_port` where given (a redirect answers
  // from the port the join was sent to, another lcore's).
  std::byte* write_l234(rte_mbuf* m, const JobPlan& plan, LcoreJob& lj, Peer& peer, size_t udp_payload_bytes,
                        uint16_t src_udp_port = 0) noexcept;
  static void attach_result(rte_mbuf* ext, ResultBuf* b, size_t off_bytes, uint16_t bytes) noexcept;
  static void chain_payload(rte_mbuf* hdr, rte_mbuf* ext) noexcept;
  bool fill_result(rte_mbuf* hdr, rte_mbuf* ext, const JobPlan& plan, LcoreJob& lj, const Chunk& c, int buf,
                   uint32_t round, uint32_t seg, uint16_t rank, Peer& peer) noexcept;
  // What became of the frame being handled: the first outcome named wins (a push is taken once summed, so one
  // whose result then finds no mbuf stays taken). handle_frame counts each frame under its outcome: accepted,
  // frames_dropped (a named drop or malformed), redirected_out, or unaccounted when no handler named one.
  // handle_phub takes a frame whose handler returned without naming a drop.
  enum class Outcome : uint8_t { none, taken, dropped, handed_off };
  void settle(Outcome o) noexcept {
    if (outcome_ == Outcome::none) outcome_ = o;
  }
  // A handler took the frame: it is summed, answered, learnt from, or a duplicate that is answered again.
  void take() noexcept { settle(Outcome::taken); }
  // A drop no job is known for, and one counted against a job.
  void count_drop(Drop d) noexcept {
    bump(counters_.drops[static_cast<size_t>(d)]);
    settle(Outcome::dropped);
  }
  void count_drop(LcoreJob& lj, Drop d) noexcept {
    bump(lj.counters.drops[static_cast<size_t>(d)]);
    settle(Outcome::dropped);
  }
  void count_malformed(proto::ParseError e) noexcept {
    bump(counters_.malformed[static_cast<size_t>(e)]);
    settle(Outcome::dropped);
  }

  LcoreResources r_;
  LcoreCounters counters_;
  // Loop state (lcore.cpp).
  uint64_t hz_ = 0;
  uint64_t next_timer_ = 0;
  uint64_t last_drain_ = 0;
  uint64_t last_quiescent_ = 0;
  std::array<uint64_t, kGapBoundsUs.size()> gap_bounds_tsc_{};  // kGapBoundsUs in TSC cycles
  uint32_t idle_polls_ = 0;
  std::optional<RealtimePolicy> realtime_;
  std::atomic<bool> looping_{false};
  std::vector<TxBuffer, SocketAllocator<TxBuffer>> tx_;  // per port, on the lcore's socket
  uint64_t tx_pool_lent_ = 0;  // slots of the transmit buffers' pool that jobs borrowed (tenant_shares.hpp)
  struct AnswerBucket {
    double tokens = 0;
    uint64_t last_tsc = 0;  // 0: not used yet (starts full)
  };
  std::vector<AnswerBucket, SocketAllocator<AnswerBucket>> answers_;  // per port: ARP and ICMP answers (may_answer)
  const Snapshot* snap_ = nullptr;
  uint64_t now_tsc_ = 0;  // TSC at the start of the current loop iteration
  Outcome outcome_ = Outcome::none;  // of the frame being handled (settle)
  // Cycles by stage (the stage_* counters): one frame in kStageSampleEvery is timed (a TSC read costs 20-40
  // cycles); while it is handled, timing_ is set and the marks below fill in. A prime, so that the timed
  // frames do not keep landing on the same rank's pushes of a job of 2, 4, 8 ... workers (only the last
  // push of a segment seals its results).
  static constexpr uint32_t kStageSampleEvery = 61;
  uint32_t stage_countdown_ = kStageSampleEvery;
  bool timing_ = false;
  uint64_t stage_start_ = 0, stage_parsed_ = 0, stage_gated_ = 0;  // TSC marks (0: not reached)
  uint64_t stage_seal_tsc_ = 0;     // cycles in seal_for during the timed frame
  uint64_t stage_tx_before_ = 0;    // counters_.tx_burst_tsc when it started
  void start_timing() noexcept;
  void finish_timing(const Rx& rx) noexcept;
  uint32_t seq_ = 0;
  static constexpr uint16_t kMaxBurst = 32;  // frames taken from a queue or inbox at once
  static constexpr uint32_t kStoppedCopiesPerCall = 1024;  // copy_captures calls per stopped lcore's serving
  static constexpr size_t kCaptureBytesPerIteration = 16 * 1024;  // background checkpoint copy per job and iteration
  static constexpr uint32_t kCaptureChunksPerIteration = 64;  // chunks copy_captures looks at per job and iteration
  rte_mbuf* consumed_[kMaxBurst];
  rte_mbuf* burst_[kMaxBurst];  // the frames of the current RX or inbox burst
  uint16_t consumed_n_ = 0;
  uint32_t capturing_ = 0;  // jobs with a checkpoint capture attached on this lcore
  uint64_t checkpoint_work_ns_ = 0;  // thread CPU time of this iteration's checkpoint work
};
static_assert(alignof(Lcore) <= RTE_CACHE_LINE_SIZE, "OnSocket aligns to a cache line");

}  // namespace phub::engine
