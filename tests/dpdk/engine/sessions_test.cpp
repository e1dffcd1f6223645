// Sessions jobs (docs/protocol.md, "Sessions") against the real engine: a test-side worker joins with the
// v3 handshake, derives the session keys, seals its packets with seal_session_packet and opens the server's
// answers with open_session_packet. Replays, forgeries, altered payloads and packets from another source are
// refused or answered where the design says.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/session.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::test {
namespace {

using engine::Drop;

constexpr uint32_t kElems = 352;  // one segment (MTU 1500, fp32) of one chunk

config::Job sessions_job(bool payload_mac) {
  auto job = make_job(1, 2, {kElems});
  job.secret = "sessions-test-secret-0123456789";
  job.sessions = true;
  job.payload_mac = payload_mac;
  return job;
}

// The worker side of one rank's session with the server's lcore 0.
struct SessionRank {
  uint16_t rank = 0;
  uint32_t incarnation = 0;
  proto::SessionNonce nonce{};
  proto::SessionNonce challenge{};  // the server's, for the last first join
  proto::SessionKeys keys{};
  proto::ReplyAddress reply{};
  uint8_t options = 0;
  proto::ReplayWindow rx;
  uint64_t next_seq = 1;
};

// One join message of `r` (a first join, or the confirm of r.challenge), sent to the lcore that owns `chunk`;
// returns its answer taken as a client takes it (accept_joined under the handshake key, the nonce it sent).
std::optional<proto::JoinedPayload> send_join(StartedEngine& s, const config::Job& job, SessionRank& r, bool confirm,
                                              uint16_t flags, uint16_t epoch, uint32_t chunk, uint16_t* lcore_port,
                                              uint32_t seq = 0) {
  proto::JoinPayload jp{r.nonce, confirm, confirm ? r.challenge : proto::SessionNonce{}};
  std::vector<std::byte> body(proto::kJoinPayloadBytes);
  proto::write_join_payload(jp, std::span<std::byte, proto::kJoinPayloadBytes>(body.data(), body.size()));
  proto::Header h;
  h.opcode = proto::Opcode::join;
  h.rank = r.rank;
  h.aux = r.incarnation;
  h.flags = flags;
  h.epoch = epoch;
  h.chunk_id = chunk;  // which lcore's port it goes to (the chunk's owner)
  h.seq = seq;         // 0: the next number (a replay gives the recorded one)
  s.workers->send(job, r.rank, h, body);
  const auto got = s.workers->receive(1);
  if (got.size() != 1 || got[0].hdr.opcode != proto::Opcode::joined) return std::nullopt;
  const proto::AuthKey job_key = proto::derive_key(job.secret, job.id);
  const auto msg = std::span<const std::byte>(got[0].msg);
  if (lcore_port != nullptr) *lcore_port = got[0].src_port;
  return proto::accept_joined(proto::handshake_key(job_key), msg.first<proto::kHeaderBytes>(),
                              msg.subspan(proto::kHeaderBytes), r.nonce);
}

// Join `rank` as a client does: a first join, the challenge its answer brings, the confirm of it; take the
// confirm's answer and derive the session's keys. `resend`: the last attempt's confirm once more. False if
// no confirmed joined came.
bool join(StartedEngine& s, const config::Job& job, SessionRank& r, uint16_t flags = 0, uint16_t epoch = 0,
          bool resend = false, proto::SessionNonce* server_nonce = nullptr, uint32_t chunk = 0) {
  if (r.incarnation == 0) r.incarnation = 2000u + r.rank;
  if (!resend) {
    r.nonce = proto::draw_session_nonce();
    auto challenge = send_join(s, job, r, false, flags, epoch, chunk, nullptr);
    if (!challenge || (challenge->options & proto::session_option::confirmed) != 0) return false;
    r.challenge = challenge->server_nonce;
  }
  uint16_t lcore_port = 0;
  auto joined = send_join(s, job, r, true, flags, epoch, chunk, &lcore_port);
  if (!joined || (joined->options & proto::session_option::confirmed) == 0 || joined->server_nonce != r.challenge) {
    return false;
  }
  if (server_nonce != nullptr) *server_nonce = joined->server_nonce;
  r.reply = joined->reply;
  r.options = joined->options & ~proto::session_option::confirmed;
  proto::SessionContext ctx;
  ctx.rank = r.rank;
  ctx.incarnation = r.incarnation;
  ctx.lcore_index = static_cast<uint16_t>(lcore_port - job.port_base);  // the lcore that answered
  ctx.worker_nonce = r.nonce;
  ctx.server_nonce = joined->server_nonce;
  r.keys = proto::derive_session_keys(proto::derive_key(job.secret, job.id), ctx);
  return true;
}

std::vector<std::byte> gradient_bytes(uint16_t rank) {
  std::vector<float> v(kElems);
  for (uint32_t i = 0; i < kElems; ++i) v[i] = gradient(rank, 0, 0, i);
  return encode(v, Dtype::fp32);
}

proto::Header push_header(uint16_t rank, uint32_t chunk = 0) {
  proto::Header h;
  h.chunk_id = chunk;
  h.opcode = proto::Opcode::push;
  h.rank = rank;
  h.elem_count = static_cast<uint16_t>(kElems);
  return h;
}

// Send `h` and `payload` sealed under the rank's session with number `seq` (its next one when 0); `mac`
// adds the payload MAC; `alter` changes a payload byte after sealing.
void send_session(StartedEngine& s, const config::Job& job, SessionRank& r, proto::Header h,
                  const std::vector<std::byte>& payload, bool mac, uint64_t seq = 0, bool alter = false,
                  const proto::SessionKeys* keys = nullptr) {
  const uint64_t n = seq != 0 ? seq : r.next_seq++;
  s.workers->send_sealed(job, r.rank, h, payload, [&](std::span<std::byte> msg) {
    proto::seal_session_packet(proto::worker_to_server(keys != nullptr ? *keys : r.keys), msg, r.reply, n, mac);
    if (alter) msg[proto::kHeaderBytes + 5] ^= std::byte{0x40};
  });
}

template <typename F>
bool eventually(F f) {
  for (int i = 0; i < 400; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return f();
}

// Both ranks push round 0; each result opens under its rank's session (with its MAC when `mac`) and is the sum.
void push_round_and_check(StartedEngine& s, const config::Job& job, SessionRank (&ranks)[2], bool mac) {
  for (auto& r : ranks) send_session(s, job, r, push_header(r.rank), gradient_bytes(r.rank), mac);
  const auto got = s.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& g : got) {
    ASSERT_EQ(g.hdr.opcode, proto::Opcode::result);
    ASSERT_LT(g.hdr.rank, 2);
    SessionRank& r = ranks[g.hdr.rank];
    EXPECT_EQ(g.dst_port, r.reply.udp_port);
    EXPECT_EQ(g.dst_ip, r.reply.ipv4);
    EXPECT_EQ((g.hdr.flags & proto::flag::mac) != 0, mac);
    EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(r.keys), r.rx, g.msg, r.reply, mac),
              proto::SessionVerdict::ok);
    const auto sum = decode(g.payload, Dtype::fp32);
    ASSERT_EQ(sum.size(), kElems);
    for (uint32_t i = 0; i < kElems; i += 37) EXPECT_EQ(sum[i], gradient(0, 0, 0, i) + gradient(1, 0, 0, i)) << i;
  }
}

TEST(Sessions, JoinedOffersASessionAndResultsAreSealedUnderIt) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, ranks[r])) << "rank " << r;
    EXPECT_EQ(ranks[r].options, proto::session_option::session);
    EXPECT_EQ(ranks[r].reply.udp_port, 50000 + r);
  }
  push_round_and_check(s, job, ranks, false);
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);

  // Rank 0's push again, byte for byte (its number): counted as a replay, answered with nothing.
  send_session(s, job, ranks[0], push_header(0), gradient_bytes(0), false, 1);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::replayed) == 1; }));
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(100)).empty());
  EXPECT_EQ(job_counters(*s.engine, 0).duplicates, 0u) << "a replay is not even a duplicate push";
}

// The confirm makes the session; a packet sealed with other keys (a forger who saw the joined but cannot
// derive the keys) or under the job key (the pre-session form) moves nothing; the worker's own packet works.
TEST(Sessions, AForgedPacketMovesNothing) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, ranks[r]));
  }
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);
  proto::SessionKeys forged = ranks[0].keys;
  forged.worker_tag.k0 ^= 1;
  send_session(s, job, ranks[0], push_header(0), gradient_bytes(0), false, 1, false, &forged);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::bad_tag) == 1; }));
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 0u);
  s.workers->send(job, 1, push_header(1), gradient_bytes(1));
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::bad_tag) == 2; }));
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 0u);

  push_round_and_check(s, job, ranks, false);
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);
}

// A first join claims nothing, whoever sends it; a confirm takes the rank only with the challenge this lcore
// sent to its source in the current epoch: one replayed from elsewhere, or from two epochs back, is
// join_stale; one of the epoch a start just replaced (every run's race) is counted as rechallenged, not
// dropped. Each is answered with a fresh challenge.
TEST(Sessions, OnlyAFreshConfirmTakesARank) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank r;
  r.rank = 1;
  r.nonce = proto::draw_session_nonce();
  r.incarnation = 4242;
  auto first = send_join(s, job, r, false, 0, 0, 0, nullptr);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->options & proto::session_option::confirmed, 0);
  r.challenge = first->server_nonce;
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 0u);

  // The confirm from another source: the challenge is not that source's.
  s.workers->ip_shift = 9;
  auto moved = send_join(s, job, r, true, 0, 0, 0, nullptr);
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->options & proto::session_option::confirmed, 0);
  EXPECT_NE(moved->server_nonce, r.challenge);
  EXPECT_EQ(drops(*s.engine, Drop::join_stale), 1u);
  s.workers->ip_shift = 0;

  // Rank 0 of a run starts epoch 1: the challenge rank 1 got in epoch 0 is stale now.
  SessionRank zero;
  zero.rank = 0;
  ASSERT_TRUE(join(s, job, zero, proto::flag::epoch_start, 1));
  auto late = send_join(s, job, r, true, 0, 0, 0, nullptr);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->options & proto::session_option::confirmed, 0);
  EXPECT_EQ(drops(*s.engine, Drop::join_stale), 1u) << "the race of a run's start is no drop";
  EXPECT_EQ(job_counters(*s.engine, 0).joins_rechallenged, 1u);
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 1u) << "rank 0's only";

  // Another run's rank 0 starts epoch 2: the epoch-0 challenge is two epochs back now, stale.
  SessionRank zero2;
  zero2.rank = 0;
  zero2.incarnation = 777;
  ASSERT_TRUE(join(s, job, zero2, proto::flag::epoch_start, 2));
  auto older = send_join(s, job, r, true, 0, 0, 0, nullptr);
  ASSERT_TRUE(older);
  EXPECT_EQ(older->options & proto::session_option::confirmed, 0);
  EXPECT_EQ(drops(*s.engine, Drop::join_stale), 2u);
  EXPECT_EQ(job_counters(*s.engine, 0).joins_rechallenged, 1u);

  // The challenge of now, confirmed: the rank is r's.
  r.challenge = older->server_nonce;
  ASSERT_TRUE(join(s, job, r, 0, 2, true));
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 3u) << "the two rank 0s' and r's";
}

// A packet that opens under the session but comes from another source (a copy sent from elsewhere, or the
// worker's NAT moved) is handled; its answers go to the session's address.
TEST(Sessions, APacketFromAnotherSourceIsAnsweredAtTheSessionsAddress) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, ranks[r]));
  }
  push_round_and_check(s, job, ranks, false);

  proto::Header req;
  req.opcode = proto::Opcode::rerequest;
  req.rank = 1;
  s.workers->udp_port_shift = 100;
  s.workers->ip_shift = 3;
  send_session(s, job, ranks[1], req, {}, false);
  const auto got = s.workers->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.opcode, proto::Opcode::result);
  EXPECT_EQ(got[0].dst_port, 50000 + 1) << "at the session's address, not the sender's";
  EXPECT_EQ(got[0].dst_ip, ranks[1].reply.ipv4);
  EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(ranks[1].keys), ranks[1].rx, got[0].msg, ranks[1].reply,
                                       false),
            proto::SessionVerdict::ok);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_kept, 1u);
}

// payload_mac: an altered payload (the tag still right) is bad_mac, a push without the MAC is mac_missing;
// the results carry a MAC that verifies.
TEST(Sessions, PayloadMacRefusesAlteredAndUnmacedPushes) {
  auto job = sessions_job(true);
  StartedEngine s(1, {job});
  SessionRank ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, ranks[r]));
    EXPECT_EQ(ranks[r].options, proto::session_option::session | proto::session_option::payload_mac);
  }
  push_round_and_check(s, job, ranks, true);  // establishes both sessions, results MACed

  // Round 1: rank 0's push altered on the way, then without the MAC; neither counts.
  proto::Header h = push_header(0);
  h.round = 1;
  send_session(s, job, ranks[0], h, gradient_bytes(0), true, 0, true);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::bad_mac) == 1; }));
  send_session(s, job, ranks[0], h, gradient_bytes(0), false);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::mac_missing) == 1; }));
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 2u) << "only round 0's";
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(100)).empty());
}

// A resent confirm (the same nonces) is answered with the same session; a new attempt of the same process
// makes a new one, and the earlier confirm replayed after it creates nothing (counted replayed).
TEST(Sessions, AResentJoinGetsTheSameSession) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank r;
  proto::SessionNonce first{}, again{};
  ASSERT_TRUE(join(s, job, r, 0, 0, false, &first));
  const uint32_t first_confirm = s.workers->last_seq();
  ASSERT_TRUE(join(s, job, r, 0, 0, true, &again));
  EXPECT_EQ(first, again);
  SessionRank other = r;
  ASSERT_TRUE(join(s, job, other, 0, 0, false, &again));  // a new attempt of the same process: a new session
  EXPECT_NE(first, again);
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);
  // The first attempt's confirm, recorded and sent again (its number) after the second's: nothing answered.
  EXPECT_FALSE(send_join(s, job, r, true, 0, 0, 0, nullptr, first_confirm).has_value());
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::replayed) == 1; }));
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);
}

// An epoch start keeps the old run's sessions: its workers' packets still open and learn the new epoch
// (an epoch_mismatch sealed under their session), also once a new holder's session replaced theirs; a
// packet of a replaced session that names the job's epoch is dropped session_replaced.
TEST(Sessions, OldRunsWorkersLearnTheNewEpochUnderTheirSessions) {
  auto job = sessions_job(false);
  StartedEngine s(1, {job});
  SessionRank old_ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    old_ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, old_ranks[r]));
  }
  push_round_and_check(s, job, old_ranks, false);

  SessionRank fresh[2];
  for (uint16_t r = 0; r < 2; ++r) {
    fresh[r].rank = r;
    fresh[r].incarnation = 3000u + r;
  }
  ASSERT_TRUE(join(s, job, fresh[0], proto::flag::epoch_start, 1));  // a new run's rank 0 restarts the job
  // The old rank 1 (current session still its own) pushes round 1 of epoch 0.
  proto::Header h = push_header(1);
  h.round = 1;
  send_session(s, job, old_ranks[1], h, gradient_bytes(1), false);
  auto got = s.workers->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.opcode, proto::Opcode::error);
  EXPECT_EQ(got[0].hdr.status, proto::Status::epoch_mismatch);
  EXPECT_EQ(got[0].hdr.aux, 1u);
  EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(old_ranks[1].keys), old_ranks[1].rx, got[0].msg,
                                       old_ranks[1].reply, false),
            proto::SessionVerdict::ok);

  // The new run's rank 1 joins and pushes: its session replaces the old one.
  ASSERT_TRUE(join(s, job, fresh[1], 0, 1));
  proto::Header p1 = push_header(1);
  p1.epoch = 1;
  const uint64_t pushes_before = job_counters(*s.engine, 0).pushes;
  send_session(s, job, fresh[1], p1, gradient_bytes(1), false);
  EXPECT_TRUE(eventually([&] { return job_counters(*s.engine, 0).pushes == pushes_before + 1; }));
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 4u);  // both runs' confirms

  send_session(s, job, old_ranks[1], h, gradient_bytes(1), false);  // the old worker again, epoch 0
  got = s.workers->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.status, proto::Status::epoch_mismatch);
  EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(old_ranks[1].keys), old_ranks[1].rx, got[0].msg,
                                       old_ranks[1].reply, false),
            proto::SessionVerdict::ok)
      << "sealed under the former session";
  h.epoch = 1;  // an old session's packet that names the job's epoch: nothing
  send_session(s, job, old_ranks[1], h, gradient_bytes(1), false);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::session_replaced) == 1; }));
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(100)).empty());
}

// Each server lcore keeps its own session with a rank, bound to the lcore's position: a rank joins every
// lcore that owns chunks it pushes, and each lcore's results open only under that lcore's keys.
TEST(Sessions, EachLcoreHasItsOwnSessionWithARank) {
  auto job = make_job(1, 1, {kElems, kElems});
  job.secret = "sessions-test-secret-0123456789";
  job.sessions = true;
  StartedEngine s(2, {job});
  const auto& l = s.layout(0);
  ASSERT_EQ(l.chunk_count(), 2u);
  ASSERT_NE(l.chunk(0).owner, l.chunk(1).owner);
  SessionRank by_chunk[2];
  for (uint32_t c = 0; c < 2; ++c) ASSERT_TRUE(join(s, job, by_chunk[c], 0, 0, false, nullptr, c)) << "chunk " << c;
  for (uint32_t c = 0; c < 2; ++c) send_session(s, job, by_chunk[c], push_header(0, c), gradient_bytes(0), false);
  EXPECT_NE(by_chunk[0].keys, by_chunk[1].keys);
  const auto got = s.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& g : got) {
    ASSERT_EQ(g.hdr.opcode, proto::Opcode::result);
    ASSERT_LT(g.hdr.chunk_id, 2u);
    SessionRank& mine = by_chunk[g.hdr.chunk_id];
    SessionRank& other = by_chunk[1 - g.hdr.chunk_id];
    proto::ReplayWindow fresh;
    EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(other.keys), fresh, g.msg, other.reply, false),
              proto::SessionVerdict::bad_tag);
    EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(mine.keys), mine.rx, g.msg, mine.reply, false),
              proto::SessionVerdict::ok);
  }
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 2u);

  // Joins and session packets that reach another lcore's queue are handed to the owner, which opens them.
  const uint32_t on_one = l.chunk(0).owner == 1 ? 0 : 1;  // the chunk lcore 1 owns
  s.workers->queue_override = 0;
  SessionRank rejoined;
  ASSERT_TRUE(join(s, job, rejoined, 0, 0, false, nullptr, on_one));
  proto::Header h = push_header(0, on_one);
  h.round = 1;
  send_session(s, job, rejoined, h, gradient_bytes(0), false);
  const auto second = s.workers->receive(1);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(rejoined.keys), rejoined.rx, second[0].msg,
                                       rejoined.reply, false),
            proto::SessionVerdict::ok);
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 3u);
  EXPECT_GE(s.engine->totals().lcores.redirected_out, 2u);
}

// A session packet on another lcore's queue is handed to its owner only if its tag is one of the rank's
// sessions' with the owner (the owner's session board): a forged one is counted bad_tag where it arrived and
// takes no slot of the ring; a genuine one goes over and is answered.
TEST(Sessions, AForgedSessionPacketOnAnotherLcoresQueueIsNotHandedOver) {
  auto job = make_job(1, 1, {kElems, kElems});
  job.secret = "sessions-test-secret-0123456789";
  job.sessions = true;
  StartedEngine s(2, {job});
  const auto& l = s.layout(0);
  const uint32_t on_one = l.chunk(0).owner == 1 ? 0 : 1;  // the chunk lcore 1 owns
  s.workers->queue_override = 0;                          // everything arrives at lcore 0
  SessionRank r;
  ASSERT_TRUE(join(s, job, r, 0, 0, false, nullptr, on_one));
  const uint64_t handed = s.engine->totals().lcores.redirected_out;
  proto::SessionKeys forged = r.keys;
  forged.worker_tag.k1 ^= 0x10;
  send_session(s, job, r, push_header(0, on_one), gradient_bytes(0), false, 0, false, &forged);
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::bad_tag) == 1; }));
  EXPECT_EQ(s.engine->totals().lcores.redirected_out, handed) << "the forged packet stayed where it arrived";
  send_session(s, job, r, push_header(0, on_one), gradient_bytes(0), false);
  const auto got = s.workers->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(proto::open_session_packet(proto::server_to_worker(r.keys), r.rx, got[0].msg, r.reply, false),
            proto::SessionVerdict::ok);
  EXPECT_EQ(s.engine->totals().lcores.redirected_out, handed + 1);
}

// Forged session packets are refused before they are charged: a flood of them spends none of the job's rate
// (the token bucket holds 32 packets), and the ranks' own packets then pass (docs/security.md, "Charged after
// authentication").
TEST(Sessions, ForgedSessionPacketsSpendNoneOfTheJobsRate) {
  auto job = sessions_job(false);
  job.rate_limit_pps = 50;  // 32 packets at once, then one every 20 ms
  StartedEngine s(1, {job});
  SessionRank ranks[2];
  for (uint16_t r = 0; r < 2; ++r) {
    ranks[r].rank = r;
    ASSERT_TRUE(join(s, job, ranks[r])) << "rank " << r;
  }
  proto::SessionKeys forged = ranks[0].keys;
  forged.worker_tag.k0 ^= 0x4;
  for (int i = 0; i < 200; ++i) {
    send_session(s, job, ranks[i % 2], push_header(static_cast<uint16_t>(i % 2)), gradient_bytes(0), false, 0, false,
                 &forged);
  }
  EXPECT_TRUE(eventually([&] { return drops(*s.engine, Drop::bad_tag) == 200; }));
  EXPECT_EQ(drops(*s.engine, Drop::rate_limited), 0u);
  push_round_and_check(s, job, ranks, false);
  EXPECT_EQ(drops(*s.engine, Drop::rate_limited), 0u);
}

// A job with a secret and no sessions works as before: v3 joins under the handshake key, header tags.
TEST(Sessions, ASecretJobWithoutSessionsKeepsJobKeyTags) {
  auto job = make_job(1, 2, {kElems});
  job.secret = "plain-secret-job-0123456789";
  StartedEngine s(1, {job});
  s.workers->prove(job, 0);
  s.workers->prove(job, 1);
  for (uint16_t r = 0; r < 2; ++r) s.workers->send(job, r, push_header(r), gradient_bytes(r));
  const auto got = s.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  const proto::AuthKey key = proto::derive_key(job.secret, job.id);
  for (const auto& g : got) {
    EXPECT_EQ(g.hdr.opcode, proto::Opcode::result);
    EXPECT_TRUE(proto::verify_header(key, std::span<const std::byte>(g.msg).first<proto::kHeaderBytes>()));
  }
  EXPECT_EQ(job_counters(*s.engine, 0).sessions_established, 0u);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_proven, 2u);
}

}  // namespace
}  // namespace phub::test
