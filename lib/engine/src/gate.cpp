// The gate of a job's packets: tags and handshakes by the job's mode, then who may send what.
#include "gate.hpp"

#include "phub/base/ipv4.hpp"
#include "phub/engine/hierarchy.hpp"
#include "phub/proto/auth.hpp"

namespace phub::engine {

namespace {

bool previous_key_open(const JobPlan& plan, uint64_t now_tsc) noexcept {
  return plan.previous_until_tsc != 0 && now_tsc < plan.previous_until_tsc;
}

// The job key's tag over the header: the current key, or the previous one while a rotation overlaps.
bool tagged(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc, GateVerdict& v) noexcept {
  const auto wire = p.msg.first<proto::kHeaderBytes>();
  if (proto::verify_header(plan.key, wire)) return true;
  v.previous_key = previous_key_open(plan, now_tsc) && proto::verify_header(plan.previous_key, wire);
  return v.previous_key;
}

// A join: its payload, under the handshake's tag over header and payload when the job has a secret.
bool join_accepted(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc, GateVerdict& v) noexcept {
  const auto payload = p.msg.subspan(proto::kHeaderBytes);
  std::optional<proto::JoinPayload> j;
  if (plan.gate == GateMode::open) {
    j = proto::parse_join_payload(payload);
  } else {
    const auto wire = p.msg.first<proto::kHeaderBytes>();
    j = proto::accept_join(plan.handshake_key, wire, payload);
    if (!j && previous_key_open(plan, now_tsc)) {
      j = proto::accept_join(plan.previous_handshake_key, wire, payload);
      v.previous_key = j.has_value();
    }
  }
  if (j) v.join = *j;
  return j.has_value();
}

bool source_allowed(const config::Job& job, uint32_t ip) noexcept {
  if (job.allowed_sources.empty()) return true;
  for (const auto& a : job.allowed_sources) {
    const uint32_t mask = ipv4_netmask(a.prefix_len);
    if ((ip & mask) == (a.addr & mask)) return true;
  }
  return false;
}

// Whether the packet is authentic by the job's mode (a session packet: as far as this lcore can tell).
Drop authenticate(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc, GateSite site, GateVerdict& v) noexcept {
  const proto::Opcode op = p.hdr.opcode;
  if (op == proto::Opcode::join) {
    if (join_accepted(p, plan, now_tsc, v)) return Drop::count_;
    return plan.gate == GateMode::open ? Drop::bad_request : Drop::bad_tag;
  }
  switch (plan.gate) {
    case GateMode::open: return Drop::count_;
    case GateMode::job_key: return tagged(p, plan, now_tsc, v) ? Drop::count_ : Drop::bad_tag;
    case GateMode::sessions:
      if (proto::opcode_is_hub(op)) return tagged(p, plan, now_tsc, v) ? Drop::count_ : Drop::bad_tag;
      // The owner opens it under the rank's session (its window, its payload MAC); another lcore checks
      // the tag on the owner's board, so that a forged one takes no slot of the job's hand-off share.
      if (site.owner) return Drop::count_;
      return site.owner_board != nullptr && site.owner_board->tag_matches(p.hdr.rank, p.msg.first<proto::kHeaderBytes>())
                 ? Drop::count_
                 : Drop::bad_tag;
  }
  return Drop::bad_tag;
}

// Whether the sender may send it: hub forwards name a rack and exist only in hierarchical jobs; everything
// else names a rank of the job, of this hub's rack, from an allowed source.
Drop admissible(const GatePacket& p, const JobPlan& plan) noexcept {
  if (proto::opcode_is_hub(p.hdr.opcode)) return plan.hub == nullptr ? Drop::unexpected_opcode : Drop::count_;
  const uint16_t rank = p.hdr.rank;
  if (rank >= plan.math.workers) return Drop::bad_rank;
  if (hierarchical(plan.math) && plan.math.hub.rack_of_rank[rank] != plan.math.hub.my_rack) return Drop::rank_elsewhere;
  if (!source_allowed(plan.cfg, p.src_ipv4) ||
      (!plan.cfg.worker_ipv4.empty() && plan.cfg.worker_ipv4[rank] != p.src_ipv4)) {
    return Drop::source_not_allowed;
  }
  return Drop::count_;
}

}  // namespace

GateVerdict gate_job_packet(const GatePacket& p, const JobPlan& plan, uint64_t now_tsc, GateSite site) noexcept {
  GateVerdict v;
  v.drop = authenticate(p, plan, now_tsc, site, v);
  if (v.passed()) v.drop = admissible(p, plan);
  // The answer claims nothing and names only the port's address, after the same checks as a hand-off.
  if (v.passed() && !site.owner && site.owner_home_ipv4 != 0 && plan.cfg.interface_map &&
      p.hdr.opcode == proto::Opcode::join && (p.hdr.flags & proto::flag::follows_map) != 0) {
    v.answer = GateAnswer::redirect;
    v.redirect_ipv4 = site.owner_home_ipv4;
  }
  return v;
}

}  // namespace phub::engine
