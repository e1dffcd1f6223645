// The gate of a job's packets (lib/engine/src/gate.hpp), without an EAL: each mode's tags and handshakes,
// a rotation's overlap, a session packet at its owner and elsewhere, ranks, racks and sources. The last test
// checks that these cases reach every reason the gate drops for.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "gate.hpp"
#include "phub/engine/hierarchy.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/hub_state.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::engine {
namespace {

constexpr uint32_t kJob = 7, kOtherJob = 9;
constexpr uint32_t kWorkerIp = 0xc6120002;  // 198.18.0.2
constexpr uint64_t kNow = 1000;

std::set<Drop>& seen() {
  static std::set<Drop> drops;
  return drops;
}

config::Job job(const std::string& secret, bool sessions) {
  config::Job j;
  j.id = kJob;
  j.name = "gate";
  j.workers = 4;
  j.port_base = 42000;
  j.secret = secret;
  j.sessions = sessions;
  j.keys = {{"w", 4096}};
  return j;
}

JobPlan plan_of(const config::Job& j) {
  auto p = plan_job(j, 2, 1500, agg::kernels_for(agg::Isa::scalar));
  EXPECT_TRUE(p.has_value()) << p.error();
  return std::move(*p);
}

// A packet as a worker (or a peer hub) writes it: a header, then the payload.
struct Packet {
  proto::Header h;
  std::vector<std::byte> bytes;

  explicit Packet(proto::Opcode op, uint16_t rank = 0, uint32_t job_id = kJob, size_t payload_bytes = 0) {
    h.opcode = op;
    h.job_id = job_id;
    h.rank = rank;
    h.payload_bytes = static_cast<uint16_t>(payload_bytes);
    bytes.resize(proto::kHeaderBytes + payload_bytes);
    write();
  }
  void write() { proto::write_header(h, wire()); }
  std::span<std::byte, proto::kHeaderBytes> wire() { return std::span(bytes).first<proto::kHeaderBytes>(); }
  std::span<std::byte> payload() { return std::span(bytes).subspan(proto::kHeaderBytes); }
};

Packet join(uint16_t rank, bool confirm = false) {
  Packet p(proto::Opcode::join, rank, kJob, proto::kJoinPayloadBytes);
  proto::JoinPayload jp;
  jp.worker_nonce[0] = std::byte{0x5a};
  jp.confirm = confirm;
  if (confirm) jp.server_nonce[3] = std::byte{0xa5};  // the challenge it answers
  proto::write_join_payload(jp, p.payload().first<proto::kJoinPayloadBytes>());
  return p;
}

// A peer hub's hub_state (its payload well formed: the header parses).
Packet hub_state() {
  Packet p(proto::Opcode::hub_state, 1, kJob, proto::kHubStateBytes);
  proto::HubState st;
  st.nonce = 11;
  st.life = 22;
  proto::write_hub_state(st, p.payload().first<proto::kHubStateBytes>());
  return p;
}

struct At {
  GateSite site{};
  uint32_t src = kWorkerIp;
  uint64_t now = kNow;
};

GateVerdict gate(const JobPlan& plan, Packet& p, At r = {}) {
  auto h = proto::parse_header(p.bytes);
  if (!h) {
    ADD_FAILURE() << "the test's packet does not parse: " << static_cast<int>(h.error());
    return GateVerdict{};
  }
  const GateVerdict v = gate_packet(GatePacket{*h, p.bytes, r.src}, plan, r.now, r.site,
                                    [](uint32_t id) { return id == kJob || id == kOtherJob; });
  if (!v.passed()) seen().insert(v.drop);
  return v;
}

TEST(Gate, ModeIsChosenAtPlanTime) {
  EXPECT_EQ(plan_of(job("", false)).gate, GateMode::open);
  EXPECT_EQ(plan_of(job("s3cret", false)).gate, GateMode::job_key);
  EXPECT_EQ(plan_of(job("s3cret", true)).gate, GateMode::sessions);
}

TEST(Gate, AHeaderOfAnotherJobIsUnknownOrMisdirected) {
  const JobPlan plan = plan_of(job("", false));
  Packet other(proto::Opcode::push, 0, kOtherJob);
  EXPECT_EQ(gate(plan, other).drop, Drop::job_port_mismatch);
  Packet none(proto::Opcode::push, 0, 12345);
  EXPECT_EQ(gate(plan, none).drop, Drop::unknown_job);
}

TEST(Gate, OpenJobChecksTheJoinsFormAndTheRank) {
  const JobPlan plan = plan_of(job("", false));
  Packet push(proto::Opcode::push, 3);
  EXPECT_TRUE(gate(plan, push).passed());
  Packet j = join(1, true);
  const GateVerdict v = gate(plan, j);
  ASSERT_TRUE(v.passed());
  EXPECT_TRUE(v.join.confirm);
  EXPECT_EQ(v.join.worker_nonce[0], std::byte{0x5a});
  EXPECT_FALSE(v.previous_key);
  Packet no_nonce(proto::Opcode::join, 1, kJob, proto::kJoinPayloadBytes);  // a join payload of zeros
  EXPECT_EQ(gate(plan, no_nonce).drop, Drop::bad_request);
  Packet far(proto::Opcode::push, 4);
  EXPECT_EQ(gate(plan, far).drop, Drop::bad_rank);
  Packet top(proto::Opcode::push, 0xffff);
  EXPECT_EQ(gate(plan, top).drop, Drop::bad_rank);
  // A flat job has no hubs: a hub forward is an opcode it never receives.
  Packet fwd(proto::Opcode::fwd_partial);
  EXPECT_EQ(gate(plan, fwd).drop, Drop::unexpected_opcode);
  Packet state = hub_state();
  EXPECT_EQ(gate(plan, state).drop, Drop::unexpected_opcode);
}

TEST(Gate, JobKeyJobTakesItsTagsOnly) {
  JobPlan plan = plan_of(job("s3cret", false));
  Packet bare(proto::Opcode::push, 1);
  EXPECT_EQ(gate(plan, bare).drop, Drop::bad_tag);
  Packet push(proto::Opcode::push, 1);
  proto::sign_header(plan.key, push.wire());
  GateVerdict v = gate(plan, push);
  EXPECT_TRUE(v.passed());
  EXPECT_FALSE(v.previous_key);
  Packet flipped = push;
  flipped.bytes[20] ^= std::byte{1};
  EXPECT_EQ(gate(plan, flipped).drop, Drop::bad_tag);
  Packet foreign(proto::Opcode::push, 1);
  proto::sign_header(proto::derive_key("another", kJob), foreign.wire());
  EXPECT_EQ(gate(plan, foreign).drop, Drop::bad_tag);
  // The tag is checked before the rank: a forged packet learns nothing of the job's ranks.
  Packet forged_far(proto::Opcode::push, 9);
  EXPECT_EQ(gate(plan, forged_far).drop, Drop::bad_tag);
  Packet far(proto::Opcode::push, 9);
  proto::sign_header(plan.key, far.wire());
  EXPECT_EQ(gate(plan, far).drop, Drop::bad_rank);
}

TEST(Gate, JoinsCarryTheHandshakeNotTheJobKey) {
  const JobPlan plan = plan_of(job("s3cret", false));
  Packet sealed = join(2);
  proto::seal_handshake(plan.handshake_key, sealed.wire(), sealed.payload());
  const GateVerdict v = gate(plan, sealed);
  ASSERT_TRUE(v.passed());
  EXPECT_FALSE(v.join.confirm);
  Packet keyed = join(2);
  proto::sign_header(plan.key, keyed.wire());
  EXPECT_EQ(gate(plan, keyed).drop, Drop::bad_tag);
  Packet tampered = join(2);
  proto::seal_handshake(plan.handshake_key, tampered.wire(), tampered.payload());
  tampered.payload()[5] ^= std::byte{0x80};  // the tag covers the payload
  EXPECT_EQ(gate(plan, tampered).drop, Drop::bad_tag);
}

TEST(Gate, ARotatedSecretsPreviousKeyPassesUntilTheOverlapEnds) {
  JobPlan plan = plan_of(job("new-secret", false));
  const JobPlan old = plan_of(job("old-secret", false));
  plan.previous_key = old.key;
  plan.previous_handshake_key = old.handshake_key;
  plan.previous_until_tsc = kNow + 10;
  Packet push(proto::Opcode::push, 1);
  proto::sign_header(old.key, push.wire());
  Packet j = join(1);
  proto::seal_handshake(old.handshake_key, j.wire(), j.payload());
  for (Packet* p : {&push, &j}) {
    const GateVerdict during = gate(plan, *p);
    EXPECT_TRUE(during.passed());
    EXPECT_TRUE(during.previous_key);
    EXPECT_EQ(gate(plan, *p, At{.now = kNow + 10}).drop, Drop::bad_tag);
    plan.previous_until_tsc = 0;  // no rotation in progress
    EXPECT_EQ(gate(plan, *p).drop, Drop::bad_tag);
    plan.previous_until_tsc = kNow + 10;
  }
}

TEST(Gate, SessionPacketsOpenAtTheOwnerAndMatchItsBoardElsewhere) {
  const JobPlan plan = plan_of(job("s3cret", true));
  proto::SessionContext ctx;
  ctx.rank = 2;
  ctx.incarnation = 77;
  ctx.lcore_index = 1;
  PeerSession cur;
  cur.keys = proto::derive_session_keys(plan.key, ctx);
  cur.reply = proto::ReplyAddress{kWorkerIp, 40000};
  cur.valid = true;
  SessionBoard board(plan.math.workers);
  board.publish(2, cur, PeerSession{});

  Packet sealed(proto::Opcode::push, 2);
  proto::seal_session_packet(proto::worker_to_server(cur.keys), sealed.bytes, cur.reply, 1, false);
  Packet forged(proto::Opcode::push, 2);
  proto::sign_header(plan.key, forged.wire());  // the job key is not a session's

  // The owner opens session packets itself (window, payload MAC): the gate leaves them to it.
  EXPECT_TRUE(gate(plan, sealed).passed());
  EXPECT_TRUE(gate(plan, forged).passed());
  // Elsewhere only one whose tag is a session's of the rank on the owner's board is handed over.
  const At elsewhere{.site = GateSite{.owner = false, .owner_board = &board}};
  EXPECT_TRUE(gate(plan, sealed, elsewhere).passed());
  EXPECT_EQ(gate(plan, forged, elsewhere).drop, Drop::bad_tag);
  Packet other_rank = sealed;
  other_rank.h.rank = 3;
  proto::write_header(other_rank.h, other_rank.wire());
  proto::seal_session_packet(proto::worker_to_server(cur.keys), other_rank.bytes, cur.reply, 2, false);
  EXPECT_EQ(gate(plan, other_rank, elsewhere).drop, Drop::bad_tag);
  EXPECT_EQ(gate(plan, sealed, At{.site = GateSite{.owner = false}}).drop, Drop::bad_tag);
  // A session's packet from an address other than the one it binds: its tag does not match.
  Packet moved(proto::Opcode::push, 2);
  proto::seal_session_packet(proto::worker_to_server(cur.keys), moved.bytes, proto::ReplyAddress{kWorkerIp, 40001}, 3,
                             false);
  EXPECT_EQ(gate(plan, moved, elsewhere).drop, Drop::bad_tag);

  // Joins carry the handshake in a sessions job too; hub forwards the job key (and need a hierarchy).
  Packet j = join(0);
  proto::seal_handshake(plan.handshake_key, j.wire(), j.payload());
  EXPECT_TRUE(gate(plan, j, elsewhere).passed());
  Packet state = hub_state();
  EXPECT_EQ(gate(plan, state).drop, Drop::bad_tag);
  proto::sign_header(plan.key, state.wire());
  EXPECT_EQ(gate(plan, state).drop, Drop::unexpected_opcode);
}

TEST(Gate, SourcesAndPinnedAddresses) {
  config::Job j = job("", false);
  j.allowed_sources = {{0xc6120000, 24}};  // 198.18.0.0/24
  JobPlan plan = plan_of(j);
  Packet push(proto::Opcode::push, 1);
  EXPECT_TRUE(gate(plan, push).passed());
  EXPECT_TRUE(gate(plan, push, At{.src = 0xc61200fe}).passed());
  EXPECT_EQ(gate(plan, push, At{.src = 0xc6120102}).drop, Drop::source_not_allowed);
  j.allowed_sources.clear();
  j.worker_ipv4 = {0xc6120001, kWorkerIp, 0xc6120003, 0xc6120004};
  plan = plan_of(j);
  EXPECT_TRUE(gate(plan, push).passed());                   // rank 1 from its own address
  Packet rank2(proto::Opcode::push, 2);
  EXPECT_EQ(gate(plan, rank2).drop, Drop::source_not_allowed);  // rank 2 from rank 1's
  EXPECT_TRUE(gate(plan, rank2, At{.src = 0xc6120003}).passed());
}

TEST(Gate, AHubTakesItsRacksRanksAndTheForwardsOfPeerHubs) {
  config::Config c;
  config::Port port;
  port.name = "uplink";
  port.device = "net_null0";
  port.ipv4 = {0xc6121401, 23};
  c.ports = {port};
  c.lcores = {{1, {}}, {2, {}}};
  c.racks = {{"rack-a", 0xc6121401, 0}, {"rack-b", 0xc6121501, 0}};
  c.rack = "rack-a";
  config::Job j = job("s3cret", false);
  j.ranks_by_rack = {{"rack-a", {0, 1}}, {"rack-b", {2, 3}}};
  c.jobs = {j};
  JobPlan plan = plan_of(j);
  auto hub = plan_hierarchy(c, plan, port.mtu);
  ASSERT_TRUE(hub.has_value()) << hub.error();
  ASSERT_TRUE(attach_hierarchy(plan, std::move(*hub)).has_value());

  Packet mine(proto::Opcode::push, 1);
  proto::sign_header(plan.key, mine.wire());
  EXPECT_TRUE(gate(plan, mine).passed());
  Packet theirs(proto::Opcode::push, 2);
  proto::sign_header(plan.key, theirs.wire());
  EXPECT_EQ(gate(plan, theirs).drop, Drop::rank_elsewhere);
  // A forward names a rack in its rank field: no rank check, its handler checks the rack and the source.
  Packet fwd(proto::Opcode::fwd_partial, 1);
  proto::sign_header(plan.key, fwd.wire());
  EXPECT_TRUE(gate(plan, fwd).passed());
  Packet state = hub_state();
  proto::sign_header(plan.key, state.wire());
  EXPECT_TRUE(gate(plan, state).passed());
  Packet unsigned_fwd(proto::Opcode::fwd_partial, 1);
  EXPECT_EQ(gate(plan, unsigned_fwd).drop, Drop::bad_tag);
}

TEST(Gate, AJoinThatFollowsTheMapIsAnsweredWithARedirectWhereItArrived) {
  config::Job j = job("s3cret-of-sixteen-bytes", true);
  j.interface_map = true;
  const JobPlan plan = plan_of(j);
  const uint32_t home = 0xc6120101;  // 198.18.1.1: the owner's home port
  auto flagged = [&](uint16_t flags) {
    Packet p = join(1);
    p.h.flags = flags;
    p.write();
    proto::seal_handshake(plan.handshake_key, p.wire(), p.payload());
    return p;
  };
  const At elsewhere{.site = GateSite{.owner = false, .owner_home_ipv4 = home}};
  Packet p = flagged(proto::flag::follows_map);
  GateVerdict v = gate(plan, p, elsewhere);
  ASSERT_TRUE(v.passed());
  EXPECT_EQ(v.answer, GateAnswer::redirect);
  EXPECT_EQ(v.redirect_ipv4, home);
  EXPECT_EQ(v.join.worker_nonce[0], std::byte{0x5a});
  // No redirect: without the flag, at the owner, at the owner's home port, in a job without the map.
  Packet plain = flagged(0);
  EXPECT_EQ(gate(plan, plain, elsewhere).answer, GateAnswer::none);
  EXPECT_EQ(gate(plan, p, At{.site = GateSite{.owner = true, .owner_home_ipv4 = home}}).answer, GateAnswer::none);
  EXPECT_EQ(gate(plan, p, At{.site = GateSite{.owner = false}}).answer, GateAnswer::none);
  config::Job no_map = j;
  no_map.interface_map = false;
  EXPECT_EQ(gate(plan_of(no_map), p, elsewhere).answer, GateAnswer::none);
  // The checks come first: a join without the handshake's tag, or from a source the job refuses, is dropped.
  Packet forged = join(1);
  forged.h.flags = proto::flag::follows_map;
  forged.write();
  v = gate(plan, forged, elsewhere);
  EXPECT_EQ(v.drop, Drop::bad_tag);
  EXPECT_EQ(v.answer, GateAnswer::none);
  config::Job pinned = j;
  pinned.allowed_sources = {{0x0a000000, 8}};
  v = gate(plan_of(pinned), p, elsewhere);
  EXPECT_EQ(v.drop, Drop::source_not_allowed);
  EXPECT_EQ(v.answer, GateAnswer::none);
}

// Declared last: gtest runs a file's tests in order (this one needs the whole file run, unfiltered).
TEST(Gate, TheCasesAboveReachEveryReasonTheGateDropsFor) {
  const std::set<Drop> reasons = {Drop::unknown_job, Drop::job_port_mismatch, Drop::bad_tag,
                                  Drop::bad_request, Drop::unexpected_opcode, Drop::bad_rank,
                                  Drop::rank_elsewhere, Drop::source_not_allowed};
  EXPECT_EQ(seen(), reasons);
}

}  // namespace
}  // namespace phub::engine
