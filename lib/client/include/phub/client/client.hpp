// The client core: registered keys, the chunk plan, requests (operations on a key) and the progress
// engine that sends chunks within the window, retransmits, and writes results into the caller's buffers.
// Not thread-safe by itself: the C API serialises calls with a mutex and releases it while sleeping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "phub/client.h"
#include "phub/client/backoff.hpp"
#include "phub/client/error.hpp"
#include "phub/client/lanes.hpp"
#include "phub/client/options.hpp"
#include "phub/client/plan.hpp"
#include "phub/client/tracker.hpp"
#include "phub/client/transport.hpp"
#include "phub/client/window.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/header.hpp"
#include "phub/proto/hparams.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::client {

enum class OpKind : uint8_t {
  allreduce,  // push src, results (sum/mean) into dst; advances the chunks' rounds
  step,       // ps: push gradients from src, updated weights into dst; advances the rounds
  init_send,  // ps rank 0: initial weights from src (opcode init); answers are acknowledgements
  pull,       // ps: current weights into dst (opcode pull); waits while not initialised
};

[[nodiscard]] constexpr bool advances_round(OpKind k) noexcept { return k == OpKind::allreduce || k == OpKind::step; }
[[nodiscard]] constexpr uint32_t next_round(uint32_t r, uint32_t modulus) noexcept {
  return modulus == 0 ? r + 1 : (r + 1) % modulus;
}
[[nodiscard]] constexpr uint32_t prev_round(uint32_t r, uint32_t modulus) noexcept {
  return modulus == 0 ? r - 1 : (r == 0 ? modulus - 1 : r - 1);
}

struct OpId {
  uint32_t slot = 0;
  uint32_t gen = 0;
};

// What a ps step says of its round besides the gradients (docs/protocol.md, "Hyperparameters"): the
// hyperparameter set its pushes name (0: the job's configured optimizer), and whether the caller found NaN or
// Inf in its gradients (the server then skips the round for every rank).
struct StepSettings {
  uint64_t hparams = 0;
  bool nonfinite = false;
};

class Client {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Client>> connect(const Options& o);
  ~Client();  // sends leave to every server lcore
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  [[nodiscard]] Expected<void, Error> register_key(uint32_t key, uint64_t elems, Dtype d);
  // Freezes the keys and builds the chunk map; returns the number of chunks.
  [[nodiscard]] Result<uint32_t> finalize();

  // Starts an operation on a key; buffers hold the key's elements in the job's dtype and must stay valid
  // until the operation completes or is released.
  [[nodiscard]] Result<OpId> post(OpKind kind, uint32_t key, const std::byte* src, std::byte* dst,
                                  const StepSettings& step = {});
  // Drives traffic until `id` completes or misses its deadline, then forgets it. `lock` (if given) is
  // released while the thread sleeps in poll(), so other threads may post meanwhile. `skipped`, when given,
  // says whether the server skipped a step's round (a rank declared it non-finite: the weights are unchanged).
  [[nodiscard]] Expected<void, Error> wait(OpId id, std::unique_lock<std::mutex>* lock, bool* skipped = nullptr);

  // ps: a hyperparameter set for steps to name (StepSettings::hparams): checked (hparams_refusal), kept, and
  // registered with each server lcore before the first push that names it. Returns its id.
  [[nodiscard]] Result<uint64_t> register_hparams(const proto::Hparams& h);

  // ps: an optimizer state array (proto::StateArray master, moment1 or moment2) of key `key`, fp32, piece by
  // piece (state.cpp): read from the servers into `dst` with the chunks' step count, or set from `src` with
  // `step` on servers that have not trained the job yet (rank 0, before the weights' init).
  [[nodiscard]] Expected<void, Error> state_pull(uint32_t key, uint8_t array, float* dst, uint64_t* step,
                                                 std::unique_lock<std::mutex>* lock);
  [[nodiscard]] Expected<void, Error> state_init(uint32_t key, uint8_t array, const float* src, uint64_t step,
                                                 std::unique_lock<std::mutex>* lock);
  // Drives traffic without sleeping; true when `id` has completed.
  [[nodiscard]] Result<bool> test(OpId id);
  // Forgets a request; one still running is abandoned (the client is then out of step: broken).
  void release(OpId id);

  // Split allreduce (and ps step) through a per-key staging buffer.
  [[nodiscard]] Expected<void, Error> push(uint32_t key, const std::byte* src);
  [[nodiscard]] Expected<void, Error> pull(uint32_t key, std::byte* dst, std::unique_lock<std::mutex>* lock);

  [[nodiscard]] phub_stats stats() const noexcept;
  [[nodiscard]] const Options& options() const noexcept { return opt_; }
  [[nodiscard]] const Plan* plan() const noexcept { return plan_ ? &*plan_ : nullptr; }
  // The job epoch this client works in on server lcore `owner` (valid once joined).
  [[nodiscard]] uint16_t epoch(uint32_t owner = 0) const noexcept { return members_[owner].epoch; }
  // The job round this client's operations start from: the first round of the epoch it joined (0 when its
  // rank 0 restarted the job; the round after the checkpoint's when the server restored the job). Waits for
  // the join within the deadline. After PHUB_ERR_RESUMED it also ends the resume: operations are accepted
  // again, from the round returned (join.cpp, docs/client.md "Resuming after a server restart").
  [[nodiscard]] Result<uint32_t> start_round(std::unique_lock<std::mutex>* lock);

 private:
  static constexpr uint32_t kNone = UINT32_MAX;
  static constexpr uint32_t kWholeChunk = UINT32_MAX;  // a request (rerequest, pull) for every segment of a chunk
  // A late answer proves an early resend needless for this many operations after it: a result held back
  // in a busy host can arrive after the chunk's next rounds started; round numbers may wrap later.
  static constexpr uint8_t kEarlyProofOps = 4;

  struct ChunkState {
    uint32_t round = 0;         // round of the chunk's next (or current) advancing operation
    uint32_t op = kNone;        // slot of the operation using the chunk
    uint32_t missing = 0;       // segments still without a result
    bool resent = false;        // something of the current operation was sent again (Karn's rule)
    bool early_resent = false;  // round early_round was pushed again on a later result's evidence, not yet
    uint32_t early_round = 0;   // proven needless; the proof (a second answer) may come rounds later
    uint8_t early_age = 0;      // operations started on the chunk since (the proof is taken kEarlyProofOps)
    uint64_t missing_bytes = 0; // result bytes still awaited (the window's accounting)
    uint64_t first_ns = 0;      // first transmission of the current operation
    uint64_t xmit_ns = 0;       // latest transmission of its missing segments
    uint64_t xmit_mark = 0;     // packet mark of the first packet of that transmission
    uint64_t window_mark = 0;   // the window's send mark then (orders losses against decreases)
  };
  // A session with one server lcore (jobs with `sessions`, docs/protocol.md "Sessions"): established by a
  // joined that names this process as the rank's holder and asks for it. From then every packet to the
  // lcore is sealed under its keys with a new sequence number, and only what opens under them counts.
  struct Session {
    bool active = false;
    proto::SessionKeys keys{};
    proto::SessionNonce worker_nonce{};  // the two nonces it was derived from: a repeated answer to the same
    proto::SessionNonce server_nonce{};  // join names them again and keeps the session (and its numbers)
    proto::ReplyAddress reply{};         // this client's address as the server saw the join
    proto::ReplayWindow rx;              // numbers of the lcore's packets taken
    uint64_t next_tx_seq = 1;            // the next packet's number: every packet sent takes a new one
    bool payload_mac = false;            // packets with elements carry a payload MAC, both ways
    bool heard = false;                  // a packet of the lcore opened under it (the server took it up)
  };
  // This client's membership of the job on one server lcore (an owner of the chunk map): which epoch its
  // packets there carry, and the join handshake that got it (join.cpp).
  struct Membership {
    enum class State : uint8_t { asking, starting, joined };
    State state = State::asking;
    bool query = false;            // the next join claims nothing (incarnation 0): it asks where the job stands
    uint16_t epoch = 0;
    uint16_t resume_from = 0;      // while resuming: the epoch the server lost
    uint32_t first_round = 0;      // the first round of the epoch joined (the round after a restored checkpoint's)
    bool answered = false;         // a joined answer came
    bool held_by_other = false;    // another process holds the rank in the lcore's epoch
    bool other_run = false;        // the lcore's epoch belongs to another run (its rank 0 is not ours), or
                                   // has no rank 0 yet (a fresh job, before rank 0 starts an epoch)
    bool used = false;             // a result from this lcore was accepted: the epoch may not change now
    uint32_t holder = 0;           // the incarnation the last answer named as the rank's holder
    uint32_t rank0 = 0;            // ... and as rank 0's holder (0: none)
    uint32_t cookie = 0;           // the server's address cookie for this client's address (0: none yet)
    uint64_t heard_ns = 0;         // when this lcore last sent this client anything with a valid tag
    uint32_t unanswered_joins = 0; // joins sent again after silence (rejoin) since it last sent anything
    uint32_t sends = 0;            // joins sent in the current state (backoff)
    uint64_t next_send_ns = 0;
    // The join attempt's payload (its nonce drawn by begin_join; resends of the join reuse it): the queued
    // join packets send it from here. Once the server's challenge came (`challenged`), every join of the
    // attempt confirms it (docs/protocol.md, "The handshake"): only a confirm claims the rank.
    proto::SessionNonce join_nonce{};
    proto::SessionNonce challenge{};
    bool challenged = false;
    std::array<std::byte, proto::kJoinPayloadBytes> join_payload{};
    Session session;
    // Sessions a later join's answer replaced (establish_session). The server goes on answering under the
    // rank's session until this client's first packet under the newest one it offered reaches it
    // (docs/protocol.md, "Sessions"): that is the last session heard from, or a later one sent under. What
    // it sealed meanwhile still opens here, each under its own replay window (a session is kept in one slot
    // only). Nothing is sent under them.
    Session replaced;    // the newest replaced session sent under since the last one heard from
    Session last_heard;  // the newest replaced session that something was heard under
  };
  struct Op {
    OpKind kind = OpKind::allreduce;
    uint32_t key = 0;
    const std::byte* src = nullptr;
    std::byte* dst = nullptr;
    uint32_t first_chunk = 0;
    uint32_t next_chunk = 0;  // first chunk not started yet
    uint32_t end_chunk = 0;
    uint32_t chunks_left = 0;
    uint64_t deadline_ns = 0;
    uint32_t gen = 0;
    bool used = false;
    bool done = false;
    bool not_initialized_seen = false;
    int32_t stall_rank = -1;  // from round_stalled errors: a rank the server still waits for
    StepSettings step;        // ps step: its hyperparameter set and declaration
    bool skipped = false;     // ps step: a result said the round was skipped
    Error err;
  };
  // A hyperparameter set this client registered, and where (by owner) the server acknowledged it.
  struct HparamsSet {
    uint64_t id = 0;
    proto::HparamsWire wire{};
    std::vector<uint8_t> acked;     // by owner
    std::vector<uint64_t> sent_ns;  // by owner: the last registration sent (0: none since the last refusal)
    std::string refused;            // a server refused it: why (the ops naming it fail with this)
  };
  // One state pull or init in progress (state.cpp): its pieces, in batches, each answered by a result.
  struct Transfer {
    bool active = false;
    bool init = false;
    uint8_t array = 0;
    uint32_t key = 0;
    const std::byte* src = nullptr;  // init: the key's fp32 elements
    std::byte* dst = nullptr;        // pull
    uint64_t step = 0;               // init: sent; pull: what the answers carry
    bool step_seen = false;
    std::vector<std::pair<uint32_t, uint32_t>> pieces;  // (chunk, element offset in the chunk)
    std::vector<uint8_t> done;       // by piece
    size_t batch_begin = 0, batch_end = 0;  // the pieces sent and awaited now
    size_t left_in_batch = 0;
    uint64_t resend_ns = 0;
    uint64_t deadline_ns = 0;
    std::optional<Error> err;
    std::array<std::byte, proto::kTailBytes> tail{};
  };

  explicit Client(const Options& o);
  [[nodiscard]] Op* lookup(OpId id) noexcept;

  // Join handshake (join.cpp).
  void start_joining(uint64_t now);
  // Drives the joins (and a rejoin after a server restart) until every lane is joined, the client breaks, or
  // `deadline` passes (false then).
  bool pump_joins_until(uint64_t deadline, std::unique_lock<std::mutex>* lock);
  void begin_join(uint32_t owner, uint64_t now);
  void service_joins(uint64_t now);
  void send_join(uint32_t owner, uint64_t now);
  // Draws the nonce of a new join attempt on `owner` and writes its payload.
  void new_join_nonce(uint32_t owner);
  // Whether a joined (header `h`, `bytes` the whole datagram) answers this client's pending join on `owner`:
  // tagged under the handshake key (jobs with a secret) and echoing the join's nonce. Its payload if so.
  [[nodiscard]] std::optional<proto::JoinedPayload> take_joined(std::span<const std::byte> bytes, uint32_t owner) const;
  // A taken joined that names this process as the holder and asks for a session: derive it (join.cpp).
  void establish_session(const proto::Header& h, const proto::JoinedPayload& p, uint32_t owner);
  // Opens a datagram of a session; false (counted) unless it is authentic, fresh and (results of a job with
  // payload MACs) carries the right MAC.
  [[nodiscard]] bool open_session(std::span<const std::byte> bytes, const proto::Header& h, uint32_t owner);
  // Seals a written header (and the payload sent after it) of a packet to `owner` under its session: the
  // next sequence number, the MAC when the session has payload MACs and the packet carries elements.
  void seal_for_session(uint32_t owner, const proto::Header& h, std::span<std::byte, proto::kHeaderBytes> wire,
                        std::span<const std::byte> payload, std::span<const std::byte> tail = {});
  // A joined that echoes this client's join: `confirmed` when it answers a confirm the server took.
  void on_joined(const proto::Header& h, const proto::JoinedPayload& p, uint32_t owner, uint64_t now);
  // The server's challenge for the join attempt: its next joins confirm it.
  void take_challenge(uint32_t owner, const proto::SessionNonce& challenge);
  void on_epoch_mismatch(const proto::Header& h, uint32_t owner, uint64_t now);
  // Resuming after the server restored the job from a checkpoint (ps): ask every lcore where the job stands,
  // join the restored epoch, move every chunk to its first round, fail what was in flight with
  // PHUB_ERR_RESUMED.
  void begin_resume(uint64_t now);
  void on_rejoined(const proto::Header& h, bool confirmed, uint32_t owner, uint64_t now);
  void abandon_resume(const Error& e);
  void finish_resume();
  // The first round shared by every lcore's epoch; an error when they differ (servers of a sharded job
  // restored different rounds).
  [[nodiscard]] Result<uint32_t> common_first_round() const;
  void set_lane_rounds(uint32_t owner, uint32_t round);
  [[nodiscard]] bool all_joined() const noexcept { return joined_count_ == members_.size(); }
  [[nodiscard]] Endpoint endpoint_of_owner(uint32_t owner) const noexcept { return owner_ep_[owner]; }
  [[nodiscard]] Endpoint given_endpoint(uint32_t owner) const noexcept;  // server given x lcore's UDP port
  // A joined answer that names another interface for the owner's chunks: the owner's packets go there from now on
  // and its join starts again there. Once per owner, and only from the address given.
  bool move_to_interface(const proto::Header& h, uint32_t owner, uint64_t now);
  [[nodiscard]] int64_t owner_of(const Endpoint& from) const noexcept;  // -1: not one of the job's lcores

  // Progress engine.
  void pump(uint64_t now);
  void receive_all(uint64_t now);
  void on_datagram(std::span<const std::byte> bytes, const Endpoint& from, uint64_t now);
  void on_result(const proto::Header& h, std::span<const std::byte> payload, uint64_t now);
  void on_error(const proto::Header& h);
  // Hyperparameter sets (state.cpp): the registration queued to `owner` before the pushes of a chunk that name
  // set `id` (unless acknowledged, or sent within the retransmit timeout; called before the room for the pushes
  // is made), its acknowledgement, a refusal.
  void ensure_hparams(uint32_t owner, uint64_t id, uint64_t now);
  [[nodiscard]] HparamsSet* find_set(uint64_t id) noexcept;
  void on_hparams_answer(const proto::Header& h, uint32_t owner);
  [[nodiscard]] bool on_hparams_error(const proto::Header& h);
  // State transfers (state.cpp).
  [[nodiscard]] Expected<void, Error> run_transfer(std::unique_lock<std::mutex>* lock);
  void service_transfer(uint64_t now);
  void send_transfer_batch(uint64_t now);
  void on_state_result(const proto::Header& h, std::span<const std::byte> payload);
  [[nodiscard]] bool on_transfer_error(const proto::Header& h);  // an error answering a piece in flight
  [[nodiscard]] uint32_t state_piece_elems() const noexcept;
  void start_chunks(uint64_t now);
  void start_chunk(uint32_t slot, uint32_t chunk, uint64_t now);
  [[nodiscard]] bool make_room(size_t packets);
  void transmitted(uint32_t chunk, uint64_t now, uint64_t first_mark);
  // Loss recovery (recovery.cpp): lost segments found by later results, lane timers.
  void detect_losses(uint32_t lane, uint64_t now);
  void service_timers(uint64_t now);
  void expire_lane(uint32_t lane, uint64_t now);
  [[nodiscard]] bool expire_chunk(uint32_t chunk, uint32_t expiries, uint64_t now);
  void rejoin(uint32_t owner);
  // Sends every missing segment of a chunk again as its operation does (push, init or pull); false when
  // the send queue is full.
  [[nodiscard]] bool resend_chunk(uint32_t chunk, uint64_t now);
  void resend_missing(uint32_t chunk, proto::Opcode opc, bool payload, uint32_t below, uint64_t now);
  void rerequest_missing(uint32_t chunk);
  // ps pulls the server answered with not_initialized: asked again soon (rank 0's init is on its way), not
  // after a backed-off retransmit timeout.
  void retry_pulls(uint64_t now);
  void needless_resend(uint32_t chunk);
  [[nodiscard]] uint64_t reorder_window_ns() const noexcept;
  void chunk_done(uint32_t chunk, uint64_t now);
  void check_deadlines(uint64_t now);
  void flush();
  // `breaks`: the client refuses further operations (PHUB_ERR_BROKEN) unless it is resuming.
  void fail_op(uint32_t slot, Error e, bool breaks = true);
  void finish_op(uint32_t slot);
  void fail_all(const Error& e);
  // Takes the queued packets of operation `slot` out of the send queue: once an operation has ended, nothing
  // may read its buffers any more (they belong to the caller again).
  void unqueue(uint32_t slot);
  void unqueue_if(const std::function<bool(const OutPacket&)>& drop);  // the same for the packets `drop` picks
  void detach_chunk(uint32_t chunk);
  [[nodiscard]] uint64_t next_wake(uint64_t now) const noexcept;
  void sleep_until(uint64_t wake_ns, uint64_t now, std::unique_lock<std::mutex>* lock);
  [[nodiscard]] uint32_t lane_of(uint32_t chunk) const noexcept { return plan_->layout().chunk(chunk).owner; }
  [[nodiscard]] uint64_t segment_bytes(uint32_t chunk, uint32_t s) const noexcept {
    return uint64_t{plan_->segment_len(chunk, s)} * plan_->elem_bytes();
  }

  // Packet building.
  [[nodiscard]] bool queue_room(size_t packets) const noexcept { return queue_.size() + packets <= queue_cap_; }
  // After queue_[i] moved to headers_[i]: its header (and tail, if it has one) are read from there.
  void repoint(size_t i) noexcept {
    queue_[i].header = headers_[i].data();
    if (queue_[i].tail_bytes != 0) queue_[i].tail = headers_[i].data() + proto::kHeaderBytes;
  }
  // Queues a packet whose header was written to headers_[queue_.size()] (and its tail after it).
  void queue_packet(const Endpoint& to, const std::byte* payload, uint32_t payload_bytes, uint32_t op,
                    uint32_t tail_bytes = 0) {
    const size_t i = queue_.size();
    queue_.push_back(OutPacket{to, headers_[i].data(), payload, payload_bytes, op,
                               tail_bytes != 0 ? headers_[i].data() + proto::kHeaderBytes : nullptr, tail_bytes});
  }
  void enqueue(proto::Opcode op, uint32_t chunk, uint32_t round, uint32_t seg, bool with_payload, bool retransmit,
               const std::byte* payload_base);
  // A header-only packet (join, leave) to one server lcore.
  // A join carries its membership's join payload (44 bytes), sealed with the handshake key.
  void enqueue_control(proto::Opcode op, uint32_t owner, uint16_t flags, uint16_t epoch, uint32_t incarnation);

  // Messages.
  [[nodiscard]] Error timeout_error(const Op& op) const;
  [[nodiscard]] Error bad_request_error(const proto::Header& h) const;
  [[nodiscard]] std::string where() const;

  Options opt_;
  proto::AuthKey auth_{};
  proto::AuthKey handshake_auth_{};  // handshake_key(auth_): the tags of joins and joineds
  bool authenticated_ = false;
  std::unique_ptr<Transport> transport_;
  std::vector<uint64_t> key_elems_;
  std::optional<Plan> plan_;
  std::vector<ChunkState> chunks_;
  SegmentTracker tracker_;
  Window window_;
  Rto rto_;

  std::vector<Op> ops_;
  std::vector<uint32_t> free_ops_;
  std::deque<uint32_t> waiting_;  // operations with chunks not started yet, oldest first
  std::vector<uint32_t> live_;    // operations not done
  Lanes lanes_;                   // chunks awaiting results, per server lcore, in transmission order
  uint32_t reorder_scale_ = 1;    // the reordering window in units of its base (grows on needless resends)
  uint32_t reorder_quiet_ = 0;    // early resends since the scale last changed
  std::vector<std::pair<uint64_t, uint32_t>> pull_retries_;  // (when, chunk) of pulls to ask again

  std::vector<OutPacket> queue_;
  // Each queued packet's header, and after it its tail (a ps push's hyperparameter set id), sent from here.
  std::vector<std::array<std::byte, proto::kHeaderBytes + proto::kTailBytes>> headers_;
  size_t queue_cap_ = 0;
  bool send_blocked_ = false;
  uint32_t seq_ = 0;
  uint64_t marks_ = 1;  // packet marks: every packet enqueued gets the next one

  std::vector<Membership> members_;  // by owner (server x lcore)
  // Where each owner's packets go: its server's address given, or the interface the owner's joined answer named
  // (the job's chunk-to-interface map; docs/client.md, "Chunk map"). By owner.
  std::vector<Endpoint> owner_ep_;
  size_t joined_count_ = 0;
  uint32_t incarnation_ = 0;         // drawn at connect, never 0: tells this process from another of the rank
  // After a server restart: rejoining (asking the lcores, joining the restored epoch), then pending until the
  // caller takes the round to continue from (start_round); operations fail with PHUB_ERR_RESUMED meanwhile.
  enum class Resume : uint8_t { none, rejoining, pending };
  Resume resume_ = Resume::none;
  uint32_t resume_rank0_ = 0;        // rank 0's incarnation in the epoch lost: the run the restored one must be
  uint32_t resumes_ = 0;
  uint32_t rejoins_ = 0;
  std::string resume_why_;           // what operations posted while the resume is pending fail with

  std::deque<HparamsSet> sets_;    // registered hyperparameter sets, the newest last (kKeptSets at most)
  static constexpr size_t kKeptSets = 256;
  Transfer transfer_;

  std::vector<std::vector<std::byte>> stash_;      // per key: results of phub_push until phub_pull
  std::vector<std::optional<OpId>> pending_push_;  // per key

  bool answered_ = false;  // a valid packet of the job arrived from a server
  std::optional<Error> broken_;
  phub_stats st_{};
};

}  // namespace phub::client
