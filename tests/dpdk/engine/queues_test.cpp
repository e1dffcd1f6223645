// Queues owned by lcores (config::QueueMap): a server with two ports whose lcores are split per port, as a
// NUMA-local layout puts them, finishes every round of ranks that come in on either port.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "harness.hpp"

namespace phub::test {
namespace {

using engine::Drop;

constexpr uint32_t kSecondIp = 0xc6120101;  // 198.18.1.1, the second port's address

// The server on two ring links (p0 on `a`, p1 on `b`), lcore 1 polling p0 only and lcore 2 p1 only, and a
// 2-rank job: rank 0's workers face p0, rank 1's p1.
struct SplitServer {
  RingLink a{2}, b{2};
  config::Config cfg;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<Workers> on_p0, on_p1;

  explicit SplitServer(config::Job job) {
    cfg = make_config(a.server_name(), 2, {std::move(job)});
    config::Port p1 = cfg.ports[0];
    p1.name = "p1";
    p1.device = b.server_name();
    p1.ipv4 = {kSecondIp, 24};
    cfg.ports.push_back(p1);
    cfg.lcores[0].ports = {"p0"};
    cfg.lcores[1].ports = {"p1"};
    auto created = engine::Engine::create(cfg);
    if (!created) throw std::runtime_error(created.error());
    engine = std::move(*created);
    if (auto started = engine->start(); !started) throw std::runtime_error(started.error());
    on_p0 = std::make_unique<Workers>(a.worker_name(), 2, *engine, 0);
    on_p1 = std::make_unique<Workers>(b.worker_name(), 2, *engine, 1);
    // Whatever lcore owns a chunk, a rank's frames come in on its own port's queue 0 (as a NIC's RSS puts
    // one flow on one queue); the port's poller hands them to the owner.
    on_p0->queue_override = 0;
    on_p1->queue_override = 0;
  }
  ~SplitServer() {
    engine->stop();
    on_p0.reset();
    on_p1.reset();
    engine.reset();
  }
  Workers& of(uint16_t rank) { return rank == 0 ? *on_p0 : *on_p1; }
};

TEST(Queues, EachPortHasOneRxQueuePerLcoreThatPollsIt) {
  SplitServer s(make_job(1, 2, {700}));
  for (const auto& port : s.engine->ports()) {
    EXPECT_EQ(port->rx_queues(), 1) << port->describe();
    EXPECT_EQ(port->tx_queues(), 2) << port->describe();  // every lcore answers on every port
  }
  EXPECT_EQ(s.engine->queue_lines(), (std::vector<std::string>{"port p0: rx q0 lcore 1; tx one queue per lcore (2)",
                                                               "port p1: rx q0 lcore 2; tx one queue per lcore (2)"}));
}

// One round of every chunk from both ranks, each through its own port, in a shuffled order; every result is
// checked. Returns the pushes sent.
size_t push_round(SplitServer& s, const config::Job& job, const proto::Layout& l, uint32_t round, std::mt19937& rng) {
  size_t segments = 0;
  std::vector<std::tuple<uint32_t, uint32_t, uint16_t>> all;
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
      for (uint16_t r = 0; r < 2; ++r) all.emplace_back(c, seg, r);
    }
  }
  std::shuffle(all.begin(), all.end(), rng);
  for (auto [c, seg, r] : all) {
    const uint32_t off = l.segment_offset(seg);
    std::vector<float> v(l.segment_count_elems(l.chunk(c), seg));
    for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(r, round, c, off + i);
    s.of(r).send(job, r, push_header(l, c, seg, round, r, job.dtype), encode(v, job.dtype));
  }
  for (uint16_t r = 0; r < 2; ++r) {
    const auto got = s.of(r).receive(segments);
    EXPECT_EQ(got.size(), segments) << "rank " << r << " round " << round;
    std::map<std::pair<uint32_t, uint32_t>, int> seen;
    for (const auto& g : got) {
      EXPECT_EQ(g.hdr.opcode, proto::Opcode::result) << proto::status_name(g.hdr.status);
      EXPECT_EQ(g.hdr.round, round);
      EXPECT_EQ(g.hdr.rank, r);
      const uint32_t seg = g.hdr.elem_offset / l.params().segment_elems;
      ++seen[{g.hdr.chunk_id, seg}];
      const auto sum = decode(g.payload, job.dtype);
      for (uint32_t i = 0; i < sum.size(); ++i) {
        EXPECT_EQ(sum[i], gradient(0, round, g.hdr.chunk_id, g.hdr.elem_offset + i) +
                              gradient(1, round, g.hdr.chunk_id, g.hdr.elem_offset + i));
      }
    }
    EXPECT_EQ(seen.size(), segments);
  }
  return all.size();
}

TEST(Queues, LcoresSplitPerPortFinishEveryRankOnEitherPort) {
  SplitServer s(make_job(1, 2, {700, 300}));
  const auto& job = s.cfg.jobs[0];
  const auto& l = s.on_p0->layout(job, 2);
  (void)s.on_p1->layout(job, 2);
  for (uint16_t r = 0; r < 2; ++r) s.of(r).prove(job, r);
  std::mt19937 rng(5);
  for (uint32_t round = 0; round < 3; ++round) (void)push_round(s, job, l, round, rng);
  const engine::Totals t = s.engine->totals();
  // Each port's poller took every frame its port received: half the chunks' pushes were handed over.
  EXPECT_GT(t.lcores.redirected_out, 0u);
  EXPECT_EQ(t.lcores.redirected_in, t.lcores.redirected_out);
  EXPECT_EQ(t.lcores.unaccounted, 0u);
  EXPECT_EQ(s.engine->totals().lcores.drops[static_cast<size_t>(Drop::wrong_owner)], 0u);
  EXPECT_EQ(t.jobs.at(0).off_interface, 0u);  // no chunk-to-interface map: no port is off it
}

TEST(Queues, TheChunkMapNamesEachLcoresPortInJoinedAndCountsChunksSentElsewhere) {
  config::Job with_map = make_job(1, 2, {700, 300});
  with_map.interface_map = true;
  SplitServer s(with_map);
  const auto& job = s.cfg.jobs[0];
  const auto& l = s.on_p0->layout(job, 2);
  (void)s.on_p1->layout(job, 2);
  const auto lines = s.engine->startup_lines();
  const std::string want = "job 'job1' chunk map: lcore 1 -> p0 (198.18.0.1), lcore 2 -> p1 (198.18.1.1); elems per port p0 " +
                           std::to_string(l.owner_elems(0)) + " p1 " + std::to_string(l.owner_elems(1));
  EXPECT_NE(std::find(lines.begin(), lines.end(), want), lines.end()) << want;
  // Rank 0 joins both lcores through p0: each joined names its lcore's home port, p0 for lcore 1, p1 for lcore 2.
  for (uint16_t owner = 0; owner < 2; ++owner) {
    proto::Header h;
    h.opcode = proto::Opcode::join;
    h.rank = 0;
    h.aux = 1000;
    h.chunk_id = l.owned(owner)[0];  // the harness sends to the UDP port of this chunk's lcore
    s.on_p0->send(job, 0, h, {});
    const auto got = s.on_p0->receive(1);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].hdr.opcode, proto::Opcode::joined);
    EXPECT_EQ(got[0].hdr.chunk_id, owner == 0 ? kServerIp : kSecondIp) << "lcore index " << owner;
  }
  s.of(1).prove(job, 1);
  // Both ranks push every chunk through their own port: each push of a chunk whose lcore is homed on the other
  // port is handled, and counted off its interface (and handed over, as the other port's lcore received it).
  std::mt19937 rng(7);
  size_t segments = 0;  // of every chunk: per round, one of the two ranks sends each off its lcore's port
  for (uint32_t c = 0; c < l.chunk_count(); ++c) segments += l.chunk(c).segments;
  size_t pushes = 0;
  for (uint32_t round = 0; round < 2; ++round) pushes += push_round(s, job, l, round, rng);
  const engine::Totals t = s.engine->totals();
  EXPECT_EQ(pushes, 2 * 2 * segments);
  EXPECT_EQ(t.jobs.at(0).pushes, pushes);
  EXPECT_EQ(t.jobs.at(0).off_interface, 2 * segments);
  EXPECT_EQ(t.lcores.unaccounted, 0u);
}

TEST(Queues, AJoinThatFollowsTheMapIsRedirectedByTheLcoreItReachesNotHandedOver) {
  config::Job with_map = make_job(1, 2, {700, 300});
  with_map.interface_map = true;
  with_map.secret = "a-secret-of-thirty-two-bytes-ok!";
  SplitServer s(with_map);
  const auto& job = s.cfg.jobs[0];
  const auto& l = s.on_p0->layout(job, 2);
  (void)s.on_p1->layout(job, 2);
  const proto::AuthKey hs = proto::handshake_key(proto::derive_key(job.secret, job.id));
  // A first join of rank 0 for lcore 2 (homed on p1) through p0, flagged as following the map.
  auto join_for = [&](uint16_t owner, uint16_t flags, uint32_t seq) {
    proto::Header h;
    h.opcode = proto::Opcode::join;
    h.flags = flags;
    h.rank = 0;
    h.aux = 1000;
    h.seq = seq;
    h.chunk_id = l.owned(owner)[0];  // the harness sends to the UDP port of this chunk's lcore
    const std::vector<std::byte> payload = join_payload(job.id, 0, h.aux, seq);
    s.on_p0->send(job, 0, h, payload);
    return *proto::parse_join_payload(payload);
  };
  const proto::JoinPayload sent = join_for(1, proto::flag::follows_map, 11);
  auto got = s.on_p0->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.opcode, proto::Opcode::joined);
  EXPECT_EQ(got[0].src_port, job.port_base + 1);  // from the port joined: lcore 2's, at p0's address
  EXPECT_EQ(got[0].hdr.chunk_id, kSecondIp);      // p1's address: lcore 2's home
  EXPECT_EQ(got[0].hdr.epoch, 0);
  const auto redirect = proto::accept_joined(hs, std::span<const std::byte>(got[0].msg).first<proto::kHeaderBytes>(),
                                             std::span<const std::byte>(got[0].msg).subspan(proto::kHeaderBytes),
                                             sent.worker_nonce);
  ASSERT_TRUE(redirect.has_value()) << "a redirect is sealed under the handshake key and echoes the join's nonce";
  EXPECT_EQ(redirect->options, proto::session_option::redirect);
  EXPECT_EQ(redirect->server_nonce, proto::SessionNonce{});
  engine::Totals t = s.engine->totals();
  EXPECT_EQ(t.lcores.redirected_out, 0u);
  EXPECT_EQ(t.jobs.at(0).joins_redirected, 1u);
  EXPECT_EQ(t.jobs.at(0).joins, 0u);  // lcore 2 never saw it
  // The same join without the flag (a worker that sends everything to one address) is handed to lcore 2, which
  // answers it with its challenge; a flagged join for lcore 1, homed on p0, is lcore 1's own.
  (void)join_for(1, 0, 12);
  got = s.on_p0->receive(1);
  ASSERT_EQ(got.size(), 1u);
  auto answer = proto::parse_joined_payload(got[0].payload);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->options & proto::session_option::redirect, 0);
  EXPECT_EQ(got[0].hdr.chunk_id, kSecondIp);
  (void)join_for(0, proto::flag::follows_map, 13);
  got = s.on_p0->receive(1);
  ASSERT_EQ(got.size(), 1u);
  answer = proto::parse_joined_payload(got[0].payload);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->options & proto::session_option::redirect, 0);
  EXPECT_EQ(got[0].hdr.chunk_id, kServerIp);
  t = s.engine->totals();
  EXPECT_EQ(t.lcores.redirected_out, 1u);
  EXPECT_EQ(t.jobs.at(0).joins_redirected, 1u);
  EXPECT_EQ(t.jobs.at(0).joins, 2u);
  EXPECT_EQ(t.lcores.unaccounted, 0u);
}

TEST(Queues, WithoutTheMapAJoinThatFollowsItIsHandedOverAsBefore) {
  SplitServer plain(make_job(1, 2, {700, 300}));
  const auto& pj = plain.cfg.jobs[0];
  const auto& pl = plain.on_p0->layout(pj, 2);
  (void)plain.on_p1->layout(pj, 2);
  proto::Header h;
  h.opcode = proto::Opcode::join;
  h.flags = proto::flag::follows_map;
  h.aux = 1000;
  h.seq = 14;
  h.chunk_id = pl.owned(1)[0];
  plain.on_p0->send(pj, 0, h, join_payload(pj.id, 0, h.aux, h.seq));
  const auto got = plain.on_p0->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.chunk_id, 0u);
  EXPECT_EQ(plain.engine->totals().lcores.redirected_out, 1u);
  EXPECT_EQ(plain.engine->totals().jobs.at(0).joins_redirected, 0u);
}

}  // namespace
}  // namespace phub::test
