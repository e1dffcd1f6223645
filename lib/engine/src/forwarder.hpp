// The hub forwards of a hierarchical job on one lcore (docs/hierarchy.md): a view of the job's handler
// (JobHandler::hub) that sends this rack's partials to each chunk's home hub and results back, takes the other
// hubs' forwards, keeps the links' keys and the peer hubs' state, and relays a parameter-server job's weights,
// inits and hyperparameter sets to and from the chunks' homes. It sends through the handler (its message
// helpers) and steps the job's rounds through it (complete_segment). A flat job has none: the gate refuses hub
// opcodes for it, and the handler calls its forwarder only where the job is hierarchical.
//
// A forward's path: Lcore::route_frame and the gate (rx.cpp) -> JobHandler::handle (job_handler.cpp) ->
// on_forward, then on_partial or on_hub_result (forward.cpp) -> the round (round.cpp) -> the results out
// (tx.cpp) and to the other hubs (send_hub_result).
#pragma once

#include <cstdint>
#include <span>

#include "job_handler.hpp"

namespace phub::engine {

class Forwarder {
 public:
  explicit Forwarder(JobHandler& handler) noexcept : job(handler), io(handler.io), plan(handler.plan), lj(handler.lj) {}

  // The lcore's 1 ms tick: the peer hubs' MACs asked for before a forward needs them, and the job's state
  // sent to the hubs that are due it.
  void on_tick() noexcept;
  // At a chunk's home: segment `seg` of the current round has its result in out[cur], for every other rack's
  // hub.
  void send_result_to_racks(const Chunk& c, uint32_t seg) noexcept;

  // Forwards (forward.cpp).
  // A forward whose header tag passed: checked (rack, chunk, source, the peer's fingerprint, the link's keys
  // and numbering, epoch, piece), each wrong packet a counted drop, then counted into the chunk's round.
  void on_forward(RxFrame& rx) noexcept;
  void on_partial(RxFrame& rx, Chunk& c, uint32_t seg, uint16_t piece) noexcept;
  void on_hub_result(RxFrame& rx, Chunk& c, uint32_t seg) noexcept;
  // This rack's partial of segment `seg`, its pieces to the chunk's home; arms the resend deadline.
  void send_partial(Chunk& c, uint32_t seg, bool retransmit) noexcept;
  // The result segment `seg` of out[buf], labelled `round`, to the hub of `rack`. False if it was not queued
  // (counted).
  [[nodiscard]] bool send_hub_result(const Chunk& c, int buf, uint32_t round, uint32_t seg, uint16_t rack) noexcept;
  // One forward to the hub of `rack`: the header `h` and `h.payload_bytes` from `payload`, sealed with
  // the payload MAC. Zero-copy when `from` is the result buffer `payload` lies in and the port can chain.
  // False if it was not queued (the reason is counted as a drop).
  bool transmit_forward(uint16_t rack, proto::Header h, ResultBuf* from, const std::byte* payload,
                        std::span<const std::byte> tail = {}) noexcept;
  // Whether the hub of `rack` has a known MAC (copied into its Peer); asks ARP for it otherwise.
  bool resolve_hub(uint16_t rack) noexcept;
  // The stall scan's part for a rack hub: pieces still unanswered at their deadline are sent again.
  void publish_resend_timer(uint16_t rack) noexcept;
  void resend_forwards(Chunk& c, uint64_t now) noexcept;
  // hub_state.cpp: the epoch and fingerprint exchange with the peer hubs of a hierarchical job.
  // Derive the link's forward keys from both nonces (none while either is unknown); its numbering and window
  // start again.
  void rekey_link(uint16_t rack) noexcept;
  void on_hub_state(RxFrame& rx) noexcept;
  void send_hub_states() noexcept;
  void hub_state_changed() noexcept;
  // Hierarchical ps (ps_state.cpp): a rack hub sends set `id` to the home of `rack` unless it acknowledged it
  // (or it went within the resend timeout); the home takes a verified fwd_hparams and acknowledges it, the rack
  // hub takes the acknowledgement.
  void send_hparams_to(uint16_t rack, uint64_t id) noexcept;
  void on_fwd_hparams(RxFrame& rx) noexcept;
  // Parameter-server jobs across racks (hub_ps.cpp, docs/hierarchy.md "Parameter-server jobs").
  // Rank 0's init of a segment of a chunk homed elsewhere: answered from the weights the home sent here, or
  // forwarded to the home (fwd_init) while this hub has none.
  void relay_init(RxFrame& rx, Chunk& c, uint32_t seg) noexcept;
  // A ps chunk homed elsewhere without weights here (a pull or push found it uninitialised): a header-only
  // fwd_init asks the home for them, at most once per kWeightsAskUs.
  void ask_home_for_weights(Chunk& c) noexcept;
  // At the home: a verified fwd_init, rank 0's init of segment `seg` (payload) or a request for every
  // initialised segment (no payload); answered with fwd_result segments of the newest weights.
  void on_fwd_init(RxFrame& rx, Chunk& c, uint32_t seg) noexcept;
  // At a rack hub: a fwd_result of the round before the chunk's current one, the home's weights.
  void on_hub_weights(RxFrame& rx, Chunk& c, uint32_t seg) noexcept;

 private:
  JobHandler& job;
  LcoreIo& io;
  const JobPlan& plan;
  LcoreJob& lj;
};

inline Forwarder JobHandler::hub() noexcept { return Forwarder{*this}; }

}  // namespace phub::engine
