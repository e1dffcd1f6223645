// The client's join handshake and job epochs. Each server lcore keeps the job's epoch; a rank joins it once
// per process (an incarnation: a random number drawn at connect). Rank 0 of a new run restarts the job in
// the next epoch, where every rank must join again, so that the workers of an earlier run can neither
// count towards the new rounds nor keep the new workers out (docs/protocol.md, "Epochs"). A ps job that the
// server restored from a checkpoint is joined at the epoch's first round; a client that loses its epoch to a
// server restart resumes there (resume.cpp).
#include <sys/random.h>

#include <algorithm>

#include "phub/client/client.hpp"

namespace phub::client {
namespace {

constexpr uint64_t kFirstJoinGapNs = 10'000'000;   // 10 ms, doubling per join left unanswered
constexpr uint64_t kMaxJoinGapNs = 200'000'000;    // 200 ms
constexpr uint64_t kWaitJoinGapNs = 10'000'000;    // asking again while the server says wait (rank 0 to come)

uint32_t draw_incarnation() {
  uint32_t v = 0;
  while (v == 0) {
    if (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) v = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&v) >> 4) ^ 0x9e3779b9u;
  }
  return v;
}

// A ps job that a server restored from a checkpoint starts an epoch of its own at the round after the
// checkpoint's (never round 0, which starts every epoch a run's rank 0 begins), and no run holds it yet.
bool restored_and_unclaimed(const proto::Header& h) { return h.round != 0 && h.elem_offset == 0; }

}  // namespace

Endpoint Client::given_endpoint(uint32_t owner) const noexcept {
  return Endpoint{opt_.servers[owner / opt_.server_lcores], static_cast<uint16_t>(opt_.port_base + owner % opt_.server_lcores)};
}

int64_t Client::owner_of(const Endpoint& from) const noexcept {
  if (from.port < opt_.port_base || from.port >= opt_.port_base + opt_.server_lcores) return -1;
  const uint32_t lcore = from.port - opt_.port_base;
  for (size_t s = 0; s < opt_.servers.size(); ++s) {
    const auto o = static_cast<uint32_t>(s * opt_.server_lcores + lcore);
    // The address given (answers to the first join), or the interface the owner moved to.
    if (opt_.servers[s] == from.ipv4 || owner_ep_[o].ipv4 == from.ipv4) return o;
  }
  return -1;
}

bool Client::move_to_interface(const proto::Header& h, uint32_t owner, uint64_t now) {
  // The joined's chunk_id: the address of the lcore's home port (0: none, the address joined is the one).
  Endpoint& ep = owner_ep_[owner];
  if (!opt_.interface_map || h.chunk_id == 0 || h.chunk_id == ep.ipv4 || !(ep == given_endpoint(owner))) return false;
  // Only before the owner is joined: a move later (the map switched on by a reload) would start the handshake
  // again under a running epoch (rank 0's would restart the job). Such a client stays at the address given.
  if (members_[owner].state == Membership::State::joined || resume_ != Resume::none) return false;
  ep.ipv4 = h.chunk_id;
  ++st_.interface_moves;
  // A new handshake there: the challenge binds the source address, which the route to the interface may change.
  begin_join(owner, now);
  flush();
  return true;
}

void Client::start_joining(uint64_t now) {
  // Rank 0's incarnation is the run's token when there is one: the other ranks recognise their run by it.
  incarnation_ = opt_.rank == 0 && opt_.run_token != 0 ? opt_.run_token : draw_incarnation();
  if (owner_ep_.empty()) {
    for (uint32_t o = 0; o < owner_count(opt_); ++o) owner_ep_.push_back(given_endpoint(o));
  }
  members_.assign(owner_count(opt_), Membership{});
  joined_count_ = 0;
  for (uint32_t o = 0; o < members_.size(); ++o) begin_join(o, now);
  flush();
}

void Client::new_join_nonce(uint32_t owner) {
  Membership& m = members_[owner];
  if (!queue_.empty()) flush();  // a queued join sends its payload from m.join_payload
  m.join_nonce = proto::draw_session_nonce();
  m.challenged = false;
  m.challenge = proto::SessionNonce{};
  proto::write_join_payload(proto::JoinPayload{m.join_nonce, false, {}}, m.join_payload);
}

void Client::take_challenge(uint32_t owner, const proto::SessionNonce& challenge) {
  Membership& m = members_[owner];
  if (m.challenged && m.challenge == challenge) return;
  if (!queue_.empty()) flush();
  m.challenge = challenge;
  m.challenged = true;
  proto::write_join_payload(proto::JoinPayload{m.join_nonce, true, challenge}, m.join_payload);
}

void Client::begin_join(uint32_t owner, uint64_t now) {
  Membership& m = members_[owner];
  m = Membership{};  // a session of an earlier join ends too: the new join's answer brings the next one
  new_join_nonce(owner);
  if (opt_.rank == 0 && opt_.restart_job) {
    // Rank 0 of a run restarts the job. The start names the epoch after the current one; until the first
    // answer says which that is, guess 1 (a fresh server's job is in epoch 0).
    m.state = Membership::State::starting;
    m.epoch = 1;
  }
  send_join(owner, now);
}

void Client::send_join(uint32_t owner, uint64_t now) {
  Membership& m = members_[owner];
  const bool start = m.state == Membership::State::starting;
  if (!queue_room(1)) flush();
  if (!queue_room(1)) return;  // the socket is full: the next service tries again
  enqueue_control(proto::Opcode::join, owner,
                  start ? static_cast<uint16_t>(proto::flag::epoch_start |
                                                (opt_.fresh_weights ? proto::flag::fresh_weights : 0))
                        : uint16_t{0},
                  m.epoch, m.query ? 0 : incarnation_);
  // Back off while the server does not answer; while it answers "wait", ask again soon: the other workers
  // of the run are waiting for this one.
  const uint64_t gap = m.answered ? kWaitJoinGapNs : std::min(kMaxJoinGapNs, kFirstJoinGapNs << std::min<uint32_t>(m.sends, 5));
  ++m.sends;
  m.next_send_ns = now + gap;
}

void Client::service_joins(uint64_t now) {
  bool sent = false;
  for (uint32_t o = 0; o < members_.size(); ++o) {
    const Membership& m = members_[o];
    if (m.state != Membership::State::joined && m.next_send_ns <= now) {
      send_join(o, now);
      sent = true;
    }
  }
  if (sent) flush();
}

void Client::set_lane_rounds(uint32_t owner, uint32_t round) {
  if (!plan_) return;  // finalize() gives the chunks their lane's first round
  for (uint32_t c = 0; c < chunks_.size(); ++c) {
    if (lane_of(c) == owner) chunks_[c].round = round;
  }
}

std::optional<proto::JoinedPayload> Client::take_joined(std::span<const std::byte> bytes, uint32_t owner) const {
  const Membership& m = members_[owner];
  const auto wire = bytes.first<proto::kHeaderBytes>();
  const auto payload = bytes.subspan(proto::kHeaderBytes);
  if (authenticated_) return proto::accept_joined(handshake_auth_, wire, payload, m.join_nonce);
  // Without a secret anyone can answer; the echoed nonce still tells an answer to this join from a stray one.
  auto p = proto::parse_joined_payload(payload);
  if (!p || p->worker_nonce != m.join_nonce) return std::nullopt;
  return p;
}

void Client::establish_session(const proto::Header& h, const proto::JoinedPayload& p, uint32_t owner) {
  Session& s = members_[owner].session;
  // The server answers every resend of a join with the session it made for the first (same nonces): that
  // session goes on, its numbers with it.
  if (s.active && s.worker_nonce == p.worker_nonce && s.server_nonce == p.server_nonce) return;
  proto::SessionContext ctx;
  ctx.rank = opt_.rank;
  ctx.incarnation = h.aux;
  ctx.lcore_index = static_cast<uint16_t>(owner % opt_.server_lcores);
  ctx.worker_nonce = p.worker_nonce;
  ctx.server_nonce = p.server_nonce;
  // The session this one replaces may be the server's still: it keeps answering under the rank's session
  // until a packet under the new one reaches it. One that something was heard under was the server's (any
  // older one no longer is); one sent under but not heard from may have become it; one never sent under
  // cannot have.
  Membership& m = members_[owner];
  if (s.heard) {
    m.last_heard = s;
    m.replaced = Session{};
  } else if (s.active && s.next_tx_seq > 1) {
    m.replaced = s;
  }
  s = Session{};
  s.active = true;
  s.keys = proto::derive_session_keys(auth_, ctx);
  s.worker_nonce = p.worker_nonce;
  s.server_nonce = p.server_nonce;
  s.reply = p.reply;
  s.payload_mac = (p.options & proto::session_option::payload_mac) != 0;
  ++st_.sessions;
}

void Client::on_joined(const proto::Header& h, const proto::JoinedPayload& p, uint32_t owner, uint64_t now) {
  if (move_to_interface(h, owner, now)) return;
  // A redirect (the lcore that received the join named the owner's home address, proto session_option::
  // redirect) says nothing more: one that did not move this owner (it moved already, or holds its rank) is late.
  if ((p.options & proto::session_option::redirect) != 0) {
    ++st_.stale;
    return;
  }
  Membership& m = members_[owner];
  m.answered = true;
  if (h.crc32c != 0) m.cookie = h.crc32c;  // carried in every data and request packet: proves the address
  // A confirm the server took is answered with its own challenge: one for an earlier challenge of this
  // attempt (overtaken by a fresh one) is not this attempt's answer. Anything else brings the challenge of now.
  const bool confirmed = (p.options & proto::session_option::confirmed) != 0 && !m.query;
  if (confirmed && !(m.challenged && p.server_nonce == m.challenge)) return;
  if (confirmed && authenticated_ && (p.options & proto::session_option::session) != 0) establish_session(h, p, owner);
  if (!confirmed && !m.query) take_challenge(owner, p.server_nonce);
  if (m.state == Membership::State::joined) {
    // A rejoin (recovery.cpp): its challenge is confirmed at once; the confirm's answer moved the session.
    if (!confirmed && !m.query) {
      if (!queue_room(1)) flush();
      if (queue_room(1)) enqueue_control(proto::Opcode::join, owner, 0, m.epoch, incarnation_);
      flush();
    }
    return;
  }
  m.holder = h.aux;
  m.rank0 = h.elem_offset;
  if (resume_ == Resume::rejoining) return on_rejoined(h, confirmed, owner, now);
  // The other ranks join an epoch only once a rank 0 holds it (elem_offset: rank 0's holder), and with a
  // run token only if it is this run's rank 0.
  m.other_run = opt_.rank != 0 && (h.elem_offset == 0 || (opt_.run_token != 0 && h.elem_offset != opt_.run_token));
  if (confirmed && h.aux == incarnation_ && !m.other_run) {
    m.epoch = h.epoch;
    m.first_round = h.round;
    m.state = Membership::State::joined;
    m.held_by_other = false;
    ++joined_count_;
    // Nothing of this lcore was used yet, so its chunks are still at their first round: they take the epoch's
    // (the round after a restored checkpoint's, or 0). Chunks already in flight to this lcore (a re-join into
    // a restarted epoch) go out again in the new one.
    set_lane_rounds(owner, h.round);
    if (plan_) {
      std::vector<uint32_t> in_flight;
      const Lanes::Lane& lane = lanes_.lane(owner);
      for (uint32_t c = lane.head, n = lane.count; c != kNone && n > 0; c = lanes_.next(c), --n) in_flight.push_back(c);
      for (uint32_t c : in_flight) {
        if (!resend_chunk(c, now)) break;
      }
    }
    return;
  }
  if (m.state == Membership::State::starting) {
    if (h.aux == incarnation_) {
      // This process holds rank 0 in the lcore's epoch already: a start it confirmed whose answer was lost.
      // It joins that epoch, no further start.
      m.state = Membership::State::asking;
      m.epoch = h.epoch;
    } else if (opt_.mode == Mode::ps && !opt_.fresh_weights && restored_and_unclaimed(h)) {
      // The server restored the job from a checkpoint and no run took it over yet: this run resumes it
      // (joins the restored epoch, at its first round) instead of restarting it at round 0.
      m.state = Membership::State::asking;
      m.epoch = h.epoch;
    } else {
      // The job is in another epoch than guessed (or another start won): start the one after it.
      m.epoch = static_cast<uint16_t>(h.epoch + 1);
    }
    m.sends = 0;
    send_join(owner, now);
    flush();
    return;
  }
  // Another process holds this rank in the current epoch, or the epoch is not this run's: wait for this
  // run's rank 0 to restart the job (each join until then confirms the challenge of now: the one that reaches
  // the new epoch claims the rank). A free rank of this run's epoch is confirmed at once.
  m.held_by_other = h.aux != incarnation_ && h.aux != 0;
  m.epoch = h.epoch;
  if (!confirmed && !m.held_by_other && !m.other_run) {
    m.sends = 0;
    send_join(owner, now);
    flush();
  }
}

void Client::on_epoch_mismatch(const proto::Header& h, uint32_t owner, uint64_t now) {
  Membership& m = members_[owner];
  const auto server_epoch = static_cast<uint16_t>(h.aux);
  if (m.state != Membership::State::joined || h.epoch != m.epoch || server_epoch == m.epoch) {
    // An answer to something sent before this client joined the epoch, or an error that answered a packet
    // of another epoch (a genuine one recorded in an earlier run and replayed now): not about this client.
    ++st_.stale;
    return;
  }
  if (!m.used && !(opt_.rank == 0 && opt_.restart_job)) {
    // Nothing of this epoch was used yet (the new run's rank 0 restarted the job right after this worker
    // joined the old epoch): join the new one and send what is in flight again, in the new epoch.
    --joined_count_;
    begin_join(owner, now);
    flush();
    return;
  }
  if (opt_.mode == Mode::ps && resume_ == Resume::none) {
    // The server may have restarted and restored the job from a checkpoint: ask before giving up.
    return begin_resume(now);
  }
  // Results of the epoch were used, or this is rank 0 and another rank 0 restarted the job past it.
  fail_all(Error{PHUB_ERR_EPOCH, "job " + std::to_string(opt_.job_id) + " was restarted on the server (its epoch is now " +
                                     std::to_string(server_epoch) + ", this client's " + std::to_string(m.epoch) +
                                     "): a new run's rank 0 connected or the operator reset the job, so this worker's rounds are void; "
                                     "start it again"});
}

}  // namespace phub::client
