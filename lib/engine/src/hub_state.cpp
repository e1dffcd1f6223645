// The hub_state exchange of hierarchical jobs (docs/hierarchy.md, "Epochs across hubs" and "What all hubs
// must agree on"): every lcore tells the same lcore of each peer hub the job's epoch, the epoch's first
// round, who holds rank 0 in it, and this hub's hierarchy fingerprint. Rank 0's hub is the authority on the
// epoch; the other hubs take it from there, so that their workers' joins are answered as on a flat server.
// Each message echoes the addressee's nonce: only an answer to what the addressee sent in this run is fresh,
// so a replay of an earlier run's messages moves nothing. A peer's nonce is taken only from a fresh message,
// and a different one only from a later life of the peer (or once the nonce taken went silent); both nonces
// key the link's forwards (proto/hub_link.hpp).
#include <rte_random.h>

#include <algorithm>

#include "phub/engine/hierarchy.hpp"
#include "lcore.hpp"
#include "forwarder.hpp"
#include "job_handler.hpp"
#include "phub/proto/hub_link.hpp"
#include "phub/proto/hub_state.hpp"
#include "rx_frame.hpp"

namespace phub::engine {
namespace {

static_assert(proto::kHubFingerprintParts == HubFingerprint::kComponents);

// While a peer has not shown it holds this lcore's state, the state goes out again after this long; once
// it has, a keep-alive every kKeepAliveUs tells the peer this hub is there (docs/hierarchy.md,
// "Reachability").
constexpr uint64_t kResendUs = 10000;
constexpr uint64_t kKeepAliveUs = 100000;
// A peer whose nonce sent nothing fresh for this long may have restarted with a clock behind its earlier
// life's: then a fresh message of another nonce is taken even without a later life.
constexpr uint64_t kPeerSilentUs = 5 * kKeepAliveUs;

uint16_t authority(const JobPlan& plan) noexcept { return plan.math.hub.rack_of_rank[0]; }

}  // namespace

void Forwarder::rekey_link(uint16_t rack) noexcept {
  HubLink& link = lj.hub_links[rack];
  link.keyed = link.my_nonce != 0 && link.peer_nonce != 0;
  link.tx_seq = 1;
  link.rx_window = proto::ReplayWindow{};
  if (!link.keyed) return;
  proto::HubLinkContext c;
  c.job_id = plan.cfg.id;
  c.lcore_index = io.res.index;
  c.from_rack = plan.math.hub.my_rack;
  c.to_rack = rack;
  c.from_nonce = link.my_nonce;
  c.to_nonce = link.peer_nonce;
  link.tx_key = proto::hub_link_key(plan.hub->payload_key, c);
  std::swap(c.from_rack, c.to_rack);
  std::swap(c.from_nonce, c.to_nonce);
  link.rx_key = proto::hub_link_key(plan.hub->payload_key, c);
  bump(lj.counters.hub_links_keyed);
}

void Forwarder::hub_state_changed() noexcept {
  for (HubLink& link : lj.hub_links) {
    link.peer_has_mine = false;
    link.next_send_tsc = 0;
  }
}

void Forwarder::send_hub_states() noexcept {
  for (uint16_t rack = 0; rack < plan.math.hub.racks; ++rack) {
    HubLink& link = lj.hub_links[rack];
    if (rack == plan.math.hub.my_rack || (link.next_send_tsc != 0 && io.now_tsc < link.next_send_tsc)) continue;
    // Not sent while ARP has not found the peer yet (resolve_hub asks): the next tick tries again.
    if (!resolve_hub(rack)) continue;
    proto::HubState st;
    st.fingerprint = plan.hub->fingerprint.parts;
    st.nonce = link.my_nonce;
    st.life = link.my_life;
    // An echo-0 message brought a nonce not taken yet: it is echoed once, so that the peer, if it is a live
    // one, answers with a fresh message (a replayed one gets nothing it can use).
    st.echo = link.candidate_nonce != 0 ? link.candidate_nonce : link.peer_nonce;
    link.candidate_nonce = 0;
    st.rank0_holder = lj.peer(0).incarnation;
    st.first_round = lj.epoch_first_round;
    st.flags = lj.fresh_weights_epoch ? proto::hub_state_flag::fresh_weights : 0;
    std::array<std::byte, proto::kHubStateBytes> payload;
    proto::write_hub_state(st, payload);
    proto::Header h;
    h.opcode = proto::Opcode::hub_state;
    h.job_id = plan.cfg.id;
    h.rank = plan.math.hub.my_rack;
    h.epoch = lj.epoch;
    h.payload_bytes = static_cast<uint16_t>(payload.size());
    if (transmit_forward(rack, h, nullptr, payload.data())) bump(lj.counters.hub_states_sent);
    uint64_t wait = io.hz / 1'000'000 * (link.peer_has_mine ? kKeepAliveUs : kResendUs);
    if (io.snap->round_stall_tsc != 0) wait = std::min(wait, io.snap->round_stall_tsc / 4);  // seen before the deadline
    link.next_send_tsc = io.now_tsc + wait;
  }
}

void Forwarder::on_hub_state(RxFrame& rx) noexcept {
  const HubPlan& hub = *plan.hub;
  const proto::Header& h = rx.hdr;
  if (!proto::verify_fwd(plan.key, hub.payload_key, rx.msg.first<proto::kHeaderBytes>(), rx.payload)) {
    return io.count_drop(lj, Drop::fwd_bad_mac);
  }
  if (h.rank >= plan.math.hub.racks || h.rank == plan.math.hub.my_rack) return io.count_drop(lj, Drop::fwd_bad_rack);
  const HubPlan::Hub& sender = hub.hubs[h.rank];
  if (rx.ip.src != sender.ipv4 || rx.udp.src_port != sender.port_base + io.res.index) {
    return io.count_drop(lj, Drop::fwd_wrong_source);
  }
  const auto st = proto::parse_hub_state(rx.payload);  // parse_header checked it: always a value here
  if (!st) return io.count_drop(lj, Drop::fwd_bad_piece);
  HubLink& link = lj.hub_links[h.rank];
  if (st->echo == 0) {
    // The peer has not heard from this lcore yet (it started, or this one did), or a replay of such a
    // message: its nonce is answered at once, and taken only from a fresh message. Nothing else is taken from
    // a message that proves no freshness.
    if (st->nonce != link.peer_nonce) link.candidate_nonce = st->nonce;
    link.next_send_tsc = 0;
    return;
  }
  if (st->echo != link.my_nonce) return io.count_drop(lj, Drop::hub_state_stale);  // another run's, or replayed

  // Fresh: the peer sent it after it received this lcore's nonce. Another nonce than the one taken comes from
  // a later life of the peer (a restart; rank 0's hub drawing anew), or, once the nonce taken went silent, from
  // a peer that restarted with its clock behind. A message of an earlier life replayed now is neither.
  if (link.peer_nonce != st->nonce) {
    const bool later_life = st->life > link.peer_life;
    const bool silent = link.peer_nonce == 0 || io.now_tsc - link.peer_fresh_tsc > io.hz / 1'000'000 * kPeerSilentUs;
    if (!later_life && !silent) return io.count_drop(lj, Drop::hub_state_stale);
    link.peer_nonce = st->nonce;
    link.peer_life = st->life;
    link.candidate_nonce = 0;
    link.next_send_tsc = 0;  // a nonce not echoed yet is answered at once
    rekey_link(h.rank);
  }
  link.peer_fresh_tsc = io.now_tsc;
  HubPeerCounters& peer = lj.hub_counters[h.rank];
  __atomic_store_n(&peer.last_answer_tsc, io.now_tsc, __ATOMIC_RELAXED);
  bump(peer.states_received);
  bump(lj.counters.hub_states_received);
  uint64_t differs = 0;
  for (size_t i = 0; i < HubFingerprint::kComponents; ++i) {
    if (st->fingerprint[i] != hub.fingerprint.parts[i]) differs |= uint64_t{1} << i;
  }
  __atomic_store_n(&peer.fingerprint_differs, differs, __ATOMIC_RELAXED);
  __atomic_store_n(&peer.fingerprint_state,
                   differs == 0 ? HubPeerCounters::kFingerprintEqual : HubPeerCounters::kFingerprintDiffers,
                   __ATOMIC_RELAXED);

  const uint16_t auth = authority(plan);
  if (auth == plan.math.hub.my_rack) {
    // Rank 0's hub: the peer holds this lcore's state once it shows this epoch and this rank 0 holder.
    link.peer_has_mine = h.epoch == lj.epoch && st->rank0_holder == lj.peer(0).incarnation;
    if (!link.peer_has_mine) link.next_send_tsc = 0;
    return;
  }
  link.peer_has_mine = true;
  if (h.rank != auth || differs != 0) return;  // epochs come only from rank 0's hub, of the same hierarchy
  const bool new_run = link.authority_nonce != st->nonce;
  if (new_run) {
    // A run of rank 0's hub this lcore has not followed yet (this hub's start, or that hub restarted): its
    // epoch is the job's, even an older number. Messages of the run followed before echo a nonce that is
    // drawn again now, so that none of them can take the epoch back.
    if (link.authority_nonce != 0) {
      do link.my_nonce = static_cast<uint32_t>(rte_rand()); while (link.my_nonce == 0);
      ++link.my_life;  // a later life of this lcore's nonce: the peer takes it
      link.next_send_tsc = 0;
      rekey_link(h.rank);
    }
    link.authority_nonce = st->nonce;
  }
  Peer& rank0 = lj.peer(0);
  if (h.epoch == lj.epoch) {
    if (st->rank0_holder == rank0.incarnation) return;
    // Within an epoch, rank 0's holder goes only from none to one (a rank 0 that joined without a restart).
    // Another holder of the same number comes only from a new run of rank 0's hub: that is a new epoch.
    if (rank0.incarnation == 0 && st->rank0_holder != 0) {
      rank0.incarnation = st->rank0_holder;
      bump(lj.counters.hub_epochs_adopted);
      return;
    }
    if (!new_run) return io.count_drop(lj, Drop::hub_state_stale);
  } else if (!new_run && !proto::epoch_newer(h.epoch, lj.epoch)) {
    return io.count_drop(lj, Drop::hub_state_stale);  // an older epoch of the run followed: a replay
  }
  job.start_epoch(h.epoch, (st->flags & proto::hub_state_flag::fresh_weights) != 0);
  lj.epoch_first_round = st->first_round;
  rank0.incarnation = st->rank0_holder;
  bump(lj.counters.hub_epochs_adopted);
}

}  // namespace phub::engine
