// Error messages of the client: what went wrong, in terms of the config fields that must match the server.
#include "phub/base/ipv4.hpp"
#include "phub/client/client.hpp"
#include "phub/client/clock.hpp"

namespace phub::client {

std::string Client::where() const {
  std::string servers;
  for (uint32_t s : opt_.servers) servers += (servers.empty() ? "" : ",") + format_ipv4(s);
  std::string keys;
  for (uint64_t k : key_elems_) keys += (keys.empty() ? "" : ",") + std::to_string(k);
  return "check that the keys [" + keys + "] (elements, in order), chunk_bytes " + std::to_string(opt_.chunk_bytes) +
         ", mtu " + std::to_string(opt_.mtu) + ", dtype " + std::string(dtype_name(opt_.dtype)) + " and server_lcores " +
         std::to_string(opt_.server_lcores) + " match job " + std::to_string(opt_.job_id) + " on " + servers;
}

Error Client::timeout_error(const Op& op) const {
  const std::string ms = std::to_string(opt_.timeout_ms) + " ms";
  if (resume_ == Resume::rejoining) {
    return Error{PHUB_ERR_EPOCH, "job " + std::to_string(opt_.job_id) + ": the server restarted (a new epoch); this "
                                     "worker did not get back into the job within " + ms + ": this run's rank 0 did "
                                     "not join the restored epoch (rank 0 gone, or not a ps job restored from a "
                                     "checkpoint), or the server did not answer"};
  }
  for (uint32_t o = 0; o < members_.size() && answered_; ++o) {
    const Membership& m = members_[o];
    if (m.state == Membership::State::joined || !m.answered) continue;
    const std::string where_lcore = "job " + std::to_string(opt_.job_id) + " on " + format_ipv4(endpoint_of_owner(o).ipv4) +
                                    " port " + std::to_string(endpoint_of_owner(o).port);
    if (m.other_run && m.rank0 == 0) {
      return Error{PHUB_ERR_EPOCH, where_lcore + ": no rank 0 joined the job's epoch " + std::to_string(m.epoch) +
                                       " within " + ms + " (rank 0 starts each run's epoch when it connects)"};
    }
    if (m.other_run) {
      return Error{PHUB_ERR_EPOCH, where_lcore + " is in epoch " + std::to_string(m.epoch) +
                                       ", which another run's rank 0 started: this run's rank 0 (run token " +
                                       std::to_string(opt_.run_token) + ") did not restart the job within " + ms};
    }
    if (m.held_by_other) {
      return Error{PHUB_ERR_EPOCH, where_lcore + ": rank " + std::to_string(opt_.rank) + " is held in the job's epoch " +
                                       std::to_string(m.epoch) + " by another process (incarnation " +
                                       std::to_string(m.holder) + ", a worker of an earlier run): a new run's rank 0 "
                                       "restarts the job when it connects (unless it joins the current epoch), and "
                                       "none did within " + ms};
    }
  }
  if (!answered_) {
    std::string servers;
    for (uint32_t s : opt_.servers) servers += (servers.empty() ? "" : ",") + format_ipv4(s);
    const std::string ports = std::to_string(opt_.port_base) + "-" + std::to_string(opt_.port_base + opt_.server_lcores - 1);
    if (st_.bad_tag != 0) {
      return Error{PHUB_ERR_AUTH, std::to_string(st_.bad_tag) + " answers from " + servers +
                                      " carried a wrong auth tag: this client's secret differs from job " +
                                      std::to_string(opt_.job_id) + "'s"};
    }
    std::string hint = "the server is down or unreachable, or it drops this client's packets silently: ";
    hint += authenticated_ ? "a secret that differs from the job's (counted as drops: bad_tag), "
                           : "the job has a secret and the client none (drops: bad_tag), ";
    hint += "a job id or rank outside the job, a source address the job does not allow, or a UDP checksum the "
            "server found wrong (drops: udp_checksum_bad; a veth with TX checksum offload sends it unfinished: "
            "ethtool -K IF tx off)";
    return Error{PHUB_ERR_UNREACHABLE, "no answer from " + servers + " ports " + ports + " within " + ms + " (job " +
                                           std::to_string(opt_.job_id) + ", rank " + std::to_string(opt_.rank) +
                                           "): " + hint};
  }
  // A server lcore that answered before, then went silent, and has not answered the joins sent to it since
  // (recovery.cpp, rejoin: a live server answers every join, also while a round waits for a slow worker): it
  // stopped (killed, or a rack hub gone) or the way to it broke. Named, rather than a timeout of the chunks.
  constexpr uint32_t kUnansweredJoins = 2;
  for (uint32_t c = op.first_chunk; plan_ && c < op.end_chunk && c < chunks_.size(); ++c) {
    if (chunks_[c].missing == 0) continue;
    const uint32_t o = lane_of(c);
    if (o >= members_.size() || members_[o].heard_ns == 0 || members_[o].unanswered_joins < kUnansweredJoins) continue;
    const Endpoint e = endpoint_of_owner(o);
    return Error{PHUB_ERR_UNREACHABLE,
                 "job " + std::to_string(opt_.job_id) + ": the server " + format_ipv4(e.ipv4) + " port " +
                     std::to_string(e.port) + " answered before, then sent nothing for the last " +
                     std::to_string((now_ns() - members_[o].heard_ns) / 1'000'000u) + " ms, not even to " +
                     std::to_string(members_[o].unanswered_joins) + " joins (operation deadline " + ms +
                     "): it stopped (a server or rack hub killed, or restarted without this job's state) or the "
                     "way to it broke"};
  }
  const uint32_t total = op.end_chunk - op.first_chunk;
  const std::string what = "key " + std::to_string(op.key) + ": " + std::to_string(op.chunks_left) + " of " +
                           std::to_string(total) + " chunks incomplete after " + ms;
  if (op.stall_rank >= 0) {
    return Error{PHUB_ERR_ROUND_STALLED, what + "; the server reports the round stalled, waiting for rank " +
                                             std::to_string(op.stall_rank)};
  }
  if (op.not_initialized_seen) {
    return Error{PHUB_ERR_NOT_INITIALIZED,
                 what + "; the server's weights are not initialised: rank 0 must call phub_init for every key"};
  }
  return Error{PHUB_ERR_TIMEOUT, what + " (retransmits " + std::to_string(st_.retransmits) + ", rerequests " +
                                     std::to_string(st_.rerequests) + "): packets are being lost, or a worker is slow"};
}

Error Client::bad_request_error(const proto::Header& h) const {
  const uint32_t c = h.chunk_id;
  const uint32_t aux = h.aux;
  const std::string head = "the server rejected a request for chunk " + std::to_string(c) + " (bad_request, detail " +
                           std::to_string(aux) + "): ";
  const uint32_t se = plan_->segment_elems();
  const uint16_t lcore = static_cast<uint16_t>(plan_->layout().chunk(c).owner % opt_.server_lcores);
  if (aux == se) {
    return Error{PHUB_ERR_CHUNK_MAP, head + "the server's chunk " + std::to_string(c) +
                                         " has another length than the client's (" +
                                         std::to_string(plan_->layout().chunk(c).elems) + " elements): " + where()};
  }
  if (aux >= 16 && aux % 16 == 0) {
    return Error{PHUB_ERR_CHUNK_MAP, head + "the server expects " + std::to_string(aux) +
                                         " elements per packet, the client sends " + std::to_string(se) +
                                         ": config.mtu or config.dtype differ from the server's port and job"};
  }
  // A sharded job: the server names the owner the client computed too, yet the client sent the chunk to that
  // owner's address, so the server there holds another part of the job (init refusals also carry aux 0).
  const uint16_t owner = plan_->layout().chunk(c).owner;
  if (opt_.servers.size() > 1 && aux == owner && !(opt_.mode == Mode::ps && aux == 0)) {
    return Error{PHUB_ERR_CHUNK_MAP, head + "chunk " + std::to_string(c) + " belongs to server " +
                                         format_ipv4(endpoint_of_owner(owner).ipv4) + " (number " +
                                         std::to_string(owner / opt_.server_lcores) + " of the client's list), " +
                                         "which answered that another of the job's servers owns it: the servers' "
                                         "shard.index must follow the order of the client's server list, with the "
                                         "same shard.count and lcores: " + where()};
  }
  if (aux != lcore && aux < 256) {
    std::string msg = head + "either chunk " + std::to_string(c) + " belongs to the server's lcore " +
                      std::to_string(aux) + " (the client sent it to lcore " + std::to_string(lcore) +
                      ", so server_lcores or the keys differ), or the job's dtype is " +
                      (aux < kDtypeCount ? std::string(dtype_name(static_cast<Dtype>(aux))) : std::string("other")) +
                      " (the client's is " + std::string(dtype_name(opt_.dtype)) + ")";
    return Error{PHUB_ERR_CHUNK_MAP, msg + ": " + where()};
  }
  if (opt_.mode == Mode::ps && aux == 0) {
    return Error{PHUB_ERR_CONFIG_MISMATCH, head + "init refused: the job is not in ps mode (config.mode)" +
                                               (opt_.servers.size() > 1 ? std::string(", or, the job being sharded, "
                                                "the server's shard.index is not its place in the client's server "
                                                "list") : std::string())};
  }
  return Error{PHUB_ERR_PROTOCOL, head + "the job's round_modulus may differ (the client's is " +
                                      std::to_string(opt_.round_modulus) + ")"};
}

}  // namespace phub::client
