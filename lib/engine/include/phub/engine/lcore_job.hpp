// The part of a job each lcore owns: its chunks and their memory, the ranks' addresses, the rate limiter
// and the counters. Created by the control thread, then touched only by the owning lcore.
#pragma once

#include <rte_mbuf.h>
#include <rte_ring.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/engine/checkpoint_capture.hpp"
#include "phub/engine/chunk.hpp"
#include "phub/engine/counters.hpp"
#include "phub/engine/hparams_table.hpp"
#include "phub/engine/job_plan.hpp"
#include "phub/engine/resend_timer.hpp"
#include "phub/engine/session_board.hpp"
#include "phub/engine/socket_memory.hpp"
#include "phub/engine/tenant_shares.hpp"
#include "phub/engine/token_bucket.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/replay_window.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_tag.hpp"

namespace phub::engine {

// One session of a rank of a sessions job (docs/protocol.md, "Sessions"): what its join established, the
// address it binds and both directions' sequence state. Zeroed memory is an invalid session.
struct PeerSession {
  proto::SessionKeys keys{};
  proto::ReplyAddress reply{};  // the join's source as this lcore saw it (IPv4 and UDP port, host order)
  MacAddr mac{};                // the join's source MAC and the server port it came in on
  uint8_t port = 0;
  proto::ReplayWindow window;   // numbers of the worker's packets seen
  uint64_t next_tx_seq = 1;     // the number of this lcore's next packet to the worker
  proto::SessionNonce worker_nonce{};
  proto::SessionNonce server_nonce{};
  uint32_t incarnation = 0;     // the join's aux
  uint32_t join_seq = 0;        // the confirm's seq: only a later confirm of the same incarnation replaces it
  uint32_t published_high = 0;  // the high half of window.top() the session board shows
  bool valid = false;
};

// Where a rank's packets come from: results and errors go back there.
struct Peer {
  MacAddr mac{};
  uint32_t ip = 0;        // host order
  uint16_t udp_port = 0;
  uint8_t port = 0;       // index of the server port it arrived on
  bool known = false;
  bool previous_key = false;  // its packets carry the job's previous secret (a rotation's overlap window)
  uint32_t incarnation = 0;  // the worker process that joined this epoch as this rank (0: none yet)
  // Whether a packet from the current address carried the address cookie (docs/protocol.md, "Address
  // cookies"). Until then, what is sent to the address spends the bytes received from it: an address
  // that may be spoofed never gets more than it sent.
  bool proven = false;
  uint64_t unproven_credit_bytes = 0;
  // The `seq` of the holder's last confirming join that set the address. A proven address moves only by a
  // confirm of the holder with a later seq: not by any other packet, nor by a confirm replayed.
  uint32_t join_seq = 0;
  // The Ethernet/IPv4/UDP headers of the last message sent to this peer, reused while the snapshot and
  // the UDP payload length stay the same (every full-size result of a job has the same length).
  uint64_t l234_generation = 0;  // Snapshot::generation it was written from (0: nothing cached)
  uint16_t l234_udp_payload = 0;
  std::array<std::byte, proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes> l234;
  // Sessions jobs: the session answers are sealed with (current: made by the holder's last confirming
  // join), and the one current replaced (former: its packets learn they are stale). An epoch start keeps
  // them: only a confirm of the rank's next holder replaces current.
  PeerSession current;
  PeerSession former;
};

// One result buffer: a DPDK external buffer with a reference count. The chunk holds one reference; every
// mbuf attached to it holds one more, so "busy" means a transmit still points at it.
struct ResultBuf {
  rte_mbuf_ext_shared_info shinfo;
  rte_iova_t data_iova;
  std::byte* data;
  rte_ring* home;  // spares ring of the owning LcoreJob: where the buffer goes when its last user frees it
};

// What one lcore saw of one peer hub of a hierarchical job (docs/hierarchy.md, "Reachability"). Written by
// the lcore (bump), read by the control thread (load).
struct HubPeerCounters {
#define PHUB_X(name, help) uint64_t name = 0;
  PHUB_HUB_PEER_COUNTERS(PHUB_X)
#undef PHUB_X
  uint64_t last_answer_tsc = 0;  // TSC of its last verified forward of the job's epoch or fresh hub_state
  // Its hierarchy fingerprint, from its last fresh hub_state: one of the values below, and the components
  // that differ from this hub's (bit i: HubFingerprint::Component i).
  uint64_t fingerprint_state = 0;
  uint64_t fingerprint_differs = 0;
  // Gauges of this lcore's resend timer towards it (ResendTimer, in TSC ticks): its smoothed round trip
  // (0: no sample yet) and the current RTO.
  uint64_t srtt_tsc = 0;
  uint64_t rto_tsc = 0;
  static constexpr uint64_t kFingerprintUnknown = 0, kFingerprintEqual = 1, kFingerprintDiffers = 2;
};

// This lcore's side of the hub_state exchange with one peer hub (docs/hierarchy.md, "Epochs across hubs").
// Touched only by the owning lcore.
struct HubLink {
  uint32_t my_nonce = 0;         // what this lcore sends the peer; a fresh message from it echoes this
  uint64_t my_life = 0;          // hub_state's life for my_nonce: larger for every nonce drawn later
  uint32_t peer_nonce = 0;       // the peer lcore's nonce, echoed back to it (0: not heard yet)
  uint64_t peer_life = 0;        // ... and its life
  uint64_t peer_fresh_tsc = 0;   // when a fresh hub_state with peer_nonce last came
  uint32_t candidate_nonce = 0;  // a nonce an echo-0 hub_state brought: echoed once, taken only from a fresh one
  uint32_t authority_nonce = 0;  // rank 0's hub: the nonce of its run whose epochs this lcore follows
  bool peer_has_mine = false;    // its last fresh message showed this lcore's state: only keep-alives due
  uint64_t next_send_tsc = 0;    // when the next hub_state goes out (0: at the next tick)
  // Forwards over the link (proto/hub_link.hpp): keys bound to both nonces, numbered from 1; the numbering
  // and the window start again whenever either nonce changes.
  bool keyed = false;
  proto::AuthKey tx_key{};
  proto::AuthKey rx_key{};
  uint64_t tx_seq = 1;
  proto::ReplayWindow rx_window;
};

// A rack hub's hyperparameter sets at one chunk home (hierarchical ps jobs): the ones the home acknowledged, and
// the one it was last sent, when. A partial that names a set the home has not acknowledged goes after it.
struct HubHparams {
  std::array<uint64_t, 8> acked{};  // the newest acknowledged ids, round robin
  uint8_t next = 0;
  uint64_t sent_id = 0;
  uint64_t sent_tsc = 0;
  [[nodiscard]] bool has(uint64_t id) const noexcept {
    for (uint64_t a : acked) {
      if (a == id) return true;
    }
    return false;
  }
  void ack(uint64_t id) noexcept {
    if (has(id)) return;
    acked[next] = id;
    next = static_cast<uint8_t>((next + 1) % acked.size());
  }
};

// The chunks (and their memory) that one lcore owns for one job. Created by the control thread on the
// lcore's NUMA socket (the object itself and its arrays) before the lcore can see it; afterwards only that
// lcore touches it, except for the counters and gauges, which the control thread reads.
class LcoreJob : public OnSocket {
 public:
  [[nodiscard]] static Expected<std::unique_ptr<LcoreJob>, std::string> create(const JobPlan& plan, uint16_t lcore,
                                                                               int socket);
  ~LcoreJob();
  LcoreJob(const LcoreJob&) = delete;
  LcoreJob& operator=(const LcoreJob&) = delete;

  [[nodiscard]] Chunk& chunk(uint32_t local_index) noexcept { return chunks_[local_index]; }
  [[nodiscard]] uint32_t chunk_count() const noexcept { return chunk_count_; }
  [[nodiscard]] Peer& peer(uint16_t rank) noexcept { return peers_[rank]; }
  [[nodiscard]] uint16_t workers() const noexcept { return workers_; }
  // Sessions jobs: this lcore's sessions as the lcores that hand it frames may read them (null otherwise).
  std::unique_ptr<SessionBoard> session_board;

  // Hierarchical jobs: where this lcore sends forwards to each rack's hub (by rack index; its own unused).
  // The MAC comes from the job's shared table of hub MACs (hub_mac), learned by any lcore from ARP or a
  // verified forward.
  [[nodiscard]] Peer& hub_peer(uint16_t rack) noexcept { return hub_peers_[rack]; }
  // The job's shared table, one entry per rack: 0, or the MAC in the low 48 bits with bit 63 set.
  std::atomic<uint64_t>* hub_mac = nullptr;
  std::vector<uint64_t> hub_arp_tsc;  // by rack: when this lcore last asked ARP for the hub (0: never)
  std::vector<HubPeerCounters> hub_counters;  // by rack
  std::vector<ResendTimer> hub_resend;        // by rack: when this lcore's unanswered partials go out again
  std::vector<uint64_t> hub_result_tsc;       // by rack: when this lcore last took a round's result from it (0: never)
  std::vector<HubLink> hub_links;             // by rack
  std::vector<HubHparams> hub_hparams;        // by rack: ps hyperparameter sets at each home

  // The result buffer behind out[i] of a chunk.
  [[nodiscard]] static ResultBuf* buf(const Chunk& c, int i) noexcept { return static_cast<ResultBuf*>(c.out_handle[i]); }
  [[nodiscard]] static bool busy(const ResultBuf* b) noexcept {
    return rte_mbuf_ext_refcnt_read(&b->shinfo) > 1;
  }
  // Before overwriting out[cur ^ 1] in a new round: if a transmit still references it, swap in a spare
  // and let the last mbuf return the old one to the pool. False if no spare was left (the old buffer is
  // then reused: only stale resends could see the new data).
  bool renew_previous(Chunk& c) noexcept;
  // References to the job's result buffers held by mbufs (queued or in flight), plus the job's replies
  // waiting in transmit buffers: the memory may be freed only once this is 0 and no lcore can reach the
  // job any more. Any thread.
  [[nodiscard]] uint64_t transmits_in_flight() const noexcept;

  // Token bucket of the job's rate limit, this lcore's share (0: unlimited). True if the packet may pass.
  bool admit_packet(uint64_t now_tsc, uint64_t tsc_hz, uint64_t rate_pps) noexcept {
    return packets_.admit(now_tsc, tsc_hz, rate_pps, 1.0, 32.0);
  }
  // Token bucket of the bytes the job's answers to requests may send, this lcore's share (0: unlimited).
  // True if an answer of `frame_bytes` may go out.
  bool admit_answer(uint64_t now_tsc, uint64_t tsc_hz, uint64_t rate_bytes_per_s, size_t frame_bytes) noexcept {
    return answer_bytes_.admit(now_tsc, tsc_hz, rate_bytes_per_s, static_cast<double>(frame_bytes), kAnswerMinBurstBytes);
  }
  static constexpr double kAnswerMinBurstBytes = 16384;  // eleven full-size result frames

  // Every rank's address and incarnation become unknown (a new epoch: the restarted workers join).
  void forget_peers() noexcept;

  // Tenant shares (docs/security.md, "Tenant isolation"; the sizes are tenant_shares.hpp's, written by the
  // control thread with each snapshot and read by the lcores with relaxed loads).
  // Frames of this job in the hand-off rings towards this lcore: taken by the lcore that received the
  // frame before it enqueues (never past handoff_share_slots), given back by this lcore when it dequeues.
  std::atomic<uint32_t> handoff_held{0};
  uint32_t handoff_share_slots = 0;
  // Packets of this job waiting in this lcore's transmit buffers (written by the lcore; the control thread
  // reads tx_hold.packets: a retired job is freed only once it is 0): its guarantee of tx_share_packets,
  // and what it borrowed of the lcore's pool (admit_tx).
  TxHold tx_hold;
  uint32_t tx_share_packets = 0;

  JobCounters counters;
  HparamsTable hparams;          // ps: the hyperparameter sets the workers registered on this lcore
  uint16_t epoch = 0;            // the job's epoch on this lcore (see docs/protocol.md, "Epochs")
  uint32_t epoch_first_round = 0;  // the epoch's first round: 0, or the round after a restored checkpoint's
  bool fresh_weights_epoch = false;  // the epoch started with fresh weights (told to peer hubs)
  uint32_t fresh_weights_starts = 0;  // epochs started with fresh weights (read by the control thread)
  bool draining = false;         // no new rounds: the operator drains the job, or a reload removes it
  uint64_t open_rounds = 0;      // chunks with a round in progress (a gauge; written with bump())
  uint32_t stall_cursor = 0;
  uint64_t allocated_bytes = 0;  // what create() took from the DPDK heap and mempools
  // The newest round a chunk of this lcore completed in the current epoch (valid when rounds_in_epoch):
  // where the control thread aims a checkpoint. Written by the lcore, read by the control thread.
  uint32_t newest_round = 0;
  bool rounds_in_epoch = false;
  // A checkpoint capture in progress (lcore_checkpoint.cpp), by local chunk index: each chunk's state
  // (CaptureState), its segments copied (capture_words bits per chunk) and how many are left.
  enum CaptureState : uint8_t { capture_idle, capture_armed, capture_opened };
  CheckpointCapture* capture = nullptr;
  std::vector<uint8_t> capture_state;
  std::vector<uint64_t> capture_copied;
  std::vector<uint32_t> capture_segs_left;
  uint32_t capture_words = 0;
  uint32_t capture_left = 0;    // chunks not copied whole yet
  uint32_t capture_cursor = 0;  // where copy_captures goes on

 private:
  LcoreJob() = default;
  void attach(Chunk& c, int i, ResultBuf* b) noexcept;

  Chunk* chunks_ = nullptr;
  uint32_t chunk_count_ = 0;
  Peer* peers_ = nullptr;
  uint16_t workers_ = 0;
  std::vector<Peer> hub_peers_;
  std::byte* arena_ = nullptr;
  std::byte* result_block_ = nullptr;
  uint32_t result_objects_ = 0;
  uint64_t result_object_bytes_ = 0;
  rte_ring* spares_ = nullptr;
  TokenBucket packets_;
  TokenBucket answer_bytes_;
};
static_assert(alignof(LcoreJob) <= RTE_CACHE_LINE_SIZE, "OnSocket aligns to a cache line");

}  // namespace phub::engine
