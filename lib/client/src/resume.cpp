// Resuming after a server restart (ps): the server restored the job from a checkpoint, in an epoch of its own
// that starts at the round after the checkpoint's. The client asks every lcore where the job stands (a join
// that claims nothing), joins the restored epoch if it is this run's, moves every chunk to its first round,
// and fails what was in flight with PHUB_ERR_RESUMED; start_round() hands the round to the caller
// (docs/client.md, "Resuming after a server restart").
#include "phub/base/ipv4.hpp"
#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"

namespace phub::client {

Result<uint32_t> Client::common_first_round() const {
  for (uint32_t o = 1; o < members_.size(); ++o) {
    if (members_[o].first_round != members_[0].first_round) {
      return fail(PHUB_ERR_EPOCH, "job " + std::to_string(opt_.job_id) + " starts at round " +
                                      std::to_string(members_[0].first_round) + " on " +
                                      format_ipv4(endpoint_of_owner(0).ipv4) + " but at round " +
                                      std::to_string(members_[o].first_round) + " on " +
                                      format_ipv4(endpoint_of_owner(o).ipv4) + " port " +
                                      std::to_string(endpoint_of_owner(o).port) +
                                      ": the job's servers restored checkpoints of different rounds");
    }
  }
  return members_.empty() ? 0 : members_[0].first_round;
}

void Client::begin_resume(uint64_t now) {
  resume_ = Resume::rejoining;
  resume_rank0_ = opt_.rank == 0 ? incarnation_ : members_[0].rank0;
  joined_count_ = 0;
  pull_retries_.clear();
  for (uint32_t o = 0; o < members_.size(); ++o) {
    Membership& m = members_[o];
    const uint16_t lost = m.state == Membership::State::joined ? m.epoch : m.resume_from;
    const uint32_t cookie = m.cookie;
    const uint16_t seen = m.epoch;
    m = Membership{};
    m.resume_from = lost;
    m.epoch = seen;
    m.cookie = cookie;
    // First a question that claims nothing: if a new run restarted the job, this worker of the old one must
    // not take a rank that one of the new run's workers is about to join.
    m.query = true;
    new_join_nonce(o);
    send_join(o, now);
  }
  flush();
}

void Client::on_rejoined(const proto::Header& h, bool confirmed, uint32_t owner, uint64_t now) {
  Membership& m = members_[owner];
  const std::string lcore = format_ipv4(endpoint_of_owner(owner).ipv4) + " port " +
                            std::to_string(endpoint_of_owner(owner).port);
  const std::string lost = "job " + std::to_string(opt_.job_id) + " was restarted on " + lcore + " (its epoch is now " +
                           std::to_string(h.epoch) + ", this client's " + std::to_string(m.resume_from) + ")";
  m.epoch = h.epoch;
  if (h.epoch == m.resume_from) {
    return abandon_resume(Error{PHUB_ERR_EPOCH, "job " + std::to_string(opt_.job_id) + " was restarted on one of its "
                                                    "servers, but " + lcore + " is still in epoch " + std::to_string(h.epoch) +
                                                    ": a sharded job resumes only when every server restored the same "
                                                    "checkpoint round; start it again"});
  }
  if (h.round == 0) {
    return abandon_resume(Error{PHUB_ERR_EPOCH, lost + " at round 0: a new run's rank 0 connected, the operator reset the "
                                                      "job, or the server restarted without a checkpoint, so this worker's "
                                                      "rounds are void; start it again"});
  }
  const bool rank0_ours = h.elem_offset == resume_rank0_ || (opt_.rank == 0 && h.elem_offset == 0);
  if ((h.aux != 0 && h.aux != incarnation_) || (h.elem_offset != 0 && !rank0_ours)) {
    return abandon_resume(Error{PHUB_ERR_EPOCH, lost + " from a checkpoint, and another run took it over (rank " +
                                                    std::to_string(opt_.rank) + " held by incarnation " +
                                                    std::to_string(h.aux) + ", rank 0 by " + std::to_string(h.elem_offset) +
                                                    "); start this worker again"});
  }
  if (!rank0_ours) return;  // this run's rank 0 has not joined the restored epoch yet: ask again soon
  if (m.query) {
    m.query = false;  // restored, and this run's: claim the rank in it
    // A new attempt, with a nonce of its own: a late answer to the question (which made no session on the
    // server) can then not be taken for the claim's.
    new_join_nonce(owner);
    m.sends = 0;
    send_join(owner, now);
    flush();
    return;
  }
  if (!confirmed) {
    // The claim's challenge: confirm it.
    m.sends = 0;
    send_join(owner, now);
    flush();
    return;
  }
  m.first_round = h.round;
  m.state = Membership::State::joined;
  ++joined_count_;
  if (all_joined()) finish_resume();
}

void Client::abandon_resume(const Error& e) {
  resume_ = Resume::none;
  fail_all(e);
  // Where this worker claimed its rank in the new epoch, tell the server it is gone (nothing more is sent to
  // it). The rank stays held there, as after any leave: a run that wants the job restarts it.
  for (uint32_t o = 0; o < members_.size(); ++o) {
    if (members_[o].holder != incarnation_ || members_[o].epoch == members_[o].resume_from) continue;
    if (!queue_room(1)) flush();
    if (queue_room(1)) enqueue_control(proto::Opcode::leave, o, 0, members_[o].epoch, incarnation_);
  }
  flush();
}

void Client::finish_resume() {
  auto round = common_first_round();
  if (!round) return abandon_resume(round.error());
  ++resumes_;
  const std::string why = "job " + std::to_string(opt_.job_id) + ": the server restarted and restored the state after round " +
                          std::to_string(prev_round(*round, opt_.round_modulus)) +
                          " from a checkpoint; this worker's operations since are void. The job resumes at round " +
                          std::to_string(*round) + " (phub_start_round): take the weights again (phub_pull) and " +
                          "repeat the steps from that round";
  resume_ = Resume::pending;  // every operation posted before the caller knows fails, also those not started
  for (uint32_t slot : std::vector<uint32_t>(live_)) fail_op(slot, Error{PHUB_ERR_RESUMED, why}, false);
  if (plan_) {
    for (auto& cs : chunks_) cs = ChunkState{*round};
  }
  resume_why_ = why;
}

Result<uint32_t> Client::start_round(std::unique_lock<std::mutex>* lock) {
  const uint64_t deadline = now_ns() + uint64_t{opt_.timeout_ms} * 1000000;
  if (!pump_joins_until(deadline, lock)) {
    Error e = timeout_error(Op{});
    if (e.code == PHUB_ERR_TIMEOUT) {
      e.message = "job " + std::to_string(opt_.job_id) + ": not joined on every server lcore within " +
                  std::to_string(opt_.timeout_ms) + " ms";
    }
    return unexpected(std::move(e));
  }
  if (broken_) return unexpected(*broken_);
  if (resume_ == Resume::pending) resume_ = Resume::none;
  return common_first_round();
}

bool Client::pump_joins_until(uint64_t deadline, std::unique_lock<std::mutex>* lock) {
  while (!broken_ && (resume_ == Resume::rejoining || !all_joined())) {
    const uint64_t now = now_ns();
    pump(now);
    if (broken_ || (resume_ != Resume::rejoining && all_joined())) break;
    if (now >= deadline) return false;
    uint64_t wake = std::min(next_wake(now), deadline);
    for (const auto& m : members_) {
      if (m.state != Membership::State::joined) wake = std::min(wake, std::max(m.next_send_ns, now));
    }
    sleep_until(wake, now, lock);
  }
  return true;
}

}  // namespace phub::client
