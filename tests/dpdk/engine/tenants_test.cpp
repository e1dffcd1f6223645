// Tenant isolation and bad input: tags, foreign ranks, unknown jobs, sources, quotas, malformed frames.
#include <gtest/gtest.h>

#include <cstring>

#include "harness.hpp"
#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"

namespace phub::test {
namespace {

using engine::Drop;

config::Job secret_job(uint32_t id, const std::string& secret) {
  auto j = make_job(id, 2, {352});
  j.secret = secret;
  return j;
}

// Job 1 (alpha) from anywhere, job 2 (beta) only from the workers' /24.
struct TwoJobs : StartedEngine {
  TwoJobs()
      : StartedEngine(1, {secret_job(1, "alpha-secret"), secret_job(2, "beta-secret")}, [](config::Config& c) {
          c.jobs[1].allowed_sources = {{kServerIp & 0xffffff00, 24}};
        }) {}

  proto::Header push(uint32_t round, uint16_t rank) {
    proto::Header h;
    h.opcode = proto::Opcode::push;
    h.rank = rank;
    h.round = round;
    h.elem_count = 352;
    return h;
  }
  std::vector<std::byte> payload(float v) { return encode(std::vector<float>(352, v), Dtype::fp32); }
};

TEST(Tenants, ForgedAndForeignPacketsAreDroppedPerReasonOthersUnaffected) {
  TwoJobs t;
  const auto& a = t.cfg.jobs[0];
  const auto& b = t.cfg.jobs[1];
  t.workers->send(a, 0, t.push(0, 0), t.payload(1), "wrong-secret");  // bad tag
  t.workers->send(a, 0, t.push(0, 0), t.payload(1), b.secret);        // another job's secret
  t.workers->send(a, 5, t.push(0, 5), t.payload(1));                  // rank outside the job
  proto::Header unknown = t.push(0, 0);
  unknown.job_id = 99;
  t.workers->send(a, 0, unknown, t.payload(1));                       // unknown job id on job 1's port
  proto::Header other = t.push(0, 0);
  other.job_id = 2;
  t.workers->send(a, 0, other, t.payload(1), b.secret);               // job 2's packet on job 1's port
  EXPECT_TRUE(t.workers->receive(1, std::chrono::milliseconds(200)).empty());

  // Meanwhile job 2 runs a round normally.
  t.workers->send(b, 0, t.push(0, 0), t.payload(2));
  t.workers->send(b, 1, t.push(0, 1), t.payload(3));
  auto got = t.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& r : got) {
    EXPECT_EQ(r.hdr.job_id, 2u);
    EXPECT_EQ(decode(r.payload, Dtype::fp32)[100], 5.0f);
    // Results carry the job's tag too.
    std::vector<std::byte> wire(proto::kHeaderBytes);
    proto::write_header(r.hdr, std::span(wire).first<proto::kHeaderBytes>());
    EXPECT_TRUE(proto::verify_header(proto::derive_key(b.secret, b.id), std::span(wire).first<proto::kHeaderBytes>()));
  }
  EXPECT_EQ(drops(*t.engine, Drop::bad_tag), 2u);
  EXPECT_EQ(drops(*t.engine, Drop::bad_rank), 1u);
  EXPECT_EQ(drops(*t.engine, Drop::unknown_job), 1u);
  EXPECT_EQ(drops(*t.engine, Drop::job_port_mismatch), 1u);
  EXPECT_EQ(job_counters(*t.engine, 0).pushes, 0u);
}

// A frame that arrives on another lcore's queue goes to its owner through a hand-off ring shared by every
// job. For a job with a secret, only frames with the job's tag take a slot: a forged flood is dropped and
// counted on the lcore that received it.
TEST(Tenants, ForgedFramesTakeNoHandOffRingSlot) {
  auto job = make_job(1, 2, {352 * 2});
  job.chunk_bytes = 352 * 4;  // two chunks: lcore 0 owns one, lcore 1 the other
  job.secret = "handoff-secret";
  StartedEngine s(2, {job});
  auto& engine = s.engine;
  Workers& w = *s.workers;
  const auto& l = s.layout(0);
  ASSERT_EQ(l.chunk_count(), 2u);
  const uint32_t chunk = l.chunk(0).owner == 1 ? 0 : 1;  // the chunk lcore 1 owns

  auto misdirected = [&](uint16_t rank, const std::string& secret) {
    proto::Header h;
    h.opcode = proto::Opcode::push;
    h.job_id = job.id;
    h.rank = rank;
    h.chunk_id = chunk;
    h.elem_count = 352;
    const auto payload = encode(std::vector<float>(352, 1.0f + rank), Dtype::fp32);
    std::vector<std::byte> frame(proto::kFrameHeadersBytes + payload.size());
    ASSERT_TRUE(proto::build_phub_frame(w.addrs(rank, static_cast<uint16_t>(job.port_base + 1)), h, payload, frame));
    proto::sign_header(proto::derive_key(secret, job.id),
                       std::span(frame).subspan(proto::kFrameHeadersBytes - proto::kHeaderBytes).first<proto::kHeaderBytes>());
    proto::refresh_udp_checksum(frame);
    w.send_frame(frame, 0);  // lcore 0's queue: not the owner's
  };
  constexpr int kForged = 300;
  for (int i = 0; i < kForged; ++i) misdirected(0, "not-the-secret");
  misdirected(0, job.secret);
  misdirected(1, job.secret);
  const auto got = w.receive(2);
  ASSERT_EQ(got.size(), 2u) << "the genuine pushes went through the ring and completed the round";
  for (const auto& r : got) EXPECT_EQ(decode(r.payload, Dtype::fp32)[7], 3.0f);
  const auto t = engine->totals();
  EXPECT_EQ(t.lcores.redirected_out, 2u) << "only the genuine frames took a ring slot";
  EXPECT_EQ(t.lcores.drops[static_cast<size_t>(Drop::bad_tag)], static_cast<uint64_t>(kForged));
  EXPECT_EQ(t.lcores.drops[static_cast<size_t>(Drop::ring_full)], 0u);
}

TEST(Tenants, SourcesOutsideTheAllowedPrefixAreDropped) {
  TwoJobs t;
  const auto& b = t.cfg.jobs[1];
  // Craft a push from 10.0.0.7 by hand.
  proto::Header h = t.push(0, 0);
  h.job_id = b.id;
  auto addrs = t.workers->addrs(0, b.port_base);
  addrs.src_ip = 0x0a000007;
  std::vector<std::byte> frame(proto::kFrameHeadersBytes + 352 * 4);
  ASSERT_TRUE(proto::build_phub_frame(addrs, h, t.payload(1), frame).has_value());
  proto::sign_header(proto::derive_key(b.secret, b.id), std::span(frame).subspan(42).first<proto::kHeaderBytes>());
  proto::refresh_udp_checksum(frame);  // the tag changed bytes under it
  t.workers->send_frame(frame, 0);
  EXPECT_TRUE(t.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(drops(*t.engine, Drop::source_not_allowed), 1u);
}

TEST(Tenants, MalformedFramesAreCountedAndServiceGoesOn) {
  TwoJobs t;
  const auto& a = t.cfg.jobs[0];
  std::vector<std::byte> good(proto::kFrameHeadersBytes + 352 * 4);
  proto::Header h = t.push(0, 0);
  h.job_id = a.id;
  ASSERT_TRUE(proto::build_phub_frame(t.workers->addrs(0, a.port_base), h, t.payload(1), good).has_value());
  proto::sign_header(proto::derive_key(a.secret, a.id), std::span(good).subspan(42).first<proto::kHeaderBytes>());
  proto::refresh_udp_checksum(good);

  auto truncated = good;
  truncated.resize(60);  // IPv4 total length now lies
  t.workers->send_frame(truncated, 0);
  auto lying = good;
  store_be<uint16_t>(lying.data() + 42 + 14, 100);  // payload_bytes lies
  proto::refresh_udp_checksum(lying);  // a sender's bug, not a corruption on the way: the checksum is right
  t.workers->send_frame(lying, 0);
  auto bad_dtype = good;
  bad_dtype[42 + 6] = std::byte{9};
  proto::refresh_udp_checksum(bad_dtype);
  t.workers->send_frame(bad_dtype, 0);
  auto huge = good;
  store_be<uint16_t>(huge.data() + 42 + 28, 65535);  // elem_count far beyond the payload
  proto::refresh_udp_checksum(huge);
  t.workers->send_frame(huge, 0);
  proto::Header wrong_op = h;
  wrong_op.opcode = proto::Opcode::result;  // a server never receives results
  t.workers->send(a, 0, wrong_op, t.payload(1));
  t.workers->send_frame(std::vector<std::byte>(10, std::byte{0xab}), 0);  // not even Ethernet

  EXPECT_TRUE(t.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(malformed(*t.engine, proto::ParseError::ipv4_bad_total_length), 1u);
  EXPECT_EQ(malformed(*t.engine, proto::ParseError::payload_length_mismatch), 1u);
  EXPECT_EQ(malformed(*t.engine, proto::ParseError::bad_dtype), 1u);
  EXPECT_EQ(malformed(*t.engine, proto::ParseError::elem_count_mismatch), 1u);
  EXPECT_EQ(malformed(*t.engine, proto::ParseError::frame_too_short), 1u);
  EXPECT_EQ(drops(*t.engine, Drop::unexpected_opcode), 1u);

  t.workers->send_frame(good, 0);
  t.workers->send(a, 1, t.push(0, 1), t.payload(4));
  auto got = t.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(decode(got[0].payload, Dtype::fp32)[0], 5.0f);
}

// A hub forward with a valid tag and payload MAC, from another address and naming rank 0 as its rack:
// this server forwards nothing yet, so it is counted and dropped before it can move rank 0's address
// or count towards a round.
TEST(Tenants, HubForwardsAreDroppedBeforeTheyTouchARankOrARound) {
  TwoJobs t;
  const auto& a = t.cfg.jobs[0];
  const proto::AuthKey key = proto::derive_key(a.secret, a.id);
  t.workers->send(a, 0, t.push(0, 0), t.payload(1));
  for (proto::Opcode op : {proto::Opcode::fwd_partial, proto::Opcode::fwd_result}) {
    proto::Header h = t.push(0, 0);
    h.opcode = op;
    h.job_id = a.id;
    auto addrs = t.workers->addrs(0, a.port_base);
    addrs.src_ip += 50;
    addrs.src_port += 50;
    std::vector<std::byte> frame(proto::kFrameHeadersBytes + 352 * 4);
    ASSERT_TRUE(proto::build_phub_frame(addrs, h, t.payload(100), frame).has_value());
    auto wire = std::span(frame).subspan(42).first<proto::kHeaderBytes>();
    proto::seal_fwd(key, proto::fwd_payload_key(key), wire, std::span(frame).subspan(42 + proto::kHeaderBytes));
    proto::refresh_udp_checksum(frame);
    t.workers->send_frame(frame, 0);
  }
  EXPECT_TRUE(t.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(drops(*t.engine, Drop::unexpected_opcode), 2u);

  t.workers->send(a, 1, t.push(0, 1), t.payload(2));
  auto got = t.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& r : got) {
    EXPECT_EQ(decode(r.payload, Dtype::fp32)[7], 3.0f);  // 1 + 2: no forward was summed
    EXPECT_EQ(r.dst_ip, kServerIp + 100 + r.hdr.rank) << "rank " << r.hdr.rank;
    EXPECT_EQ(r.dst_port, 50000 + r.hdr.rank);
  }
  EXPECT_EQ(job_counters(*t.engine, 0).pushes, 2u);
}

TEST(Tenants, QuotaAndServerMemoryAreEnforcedAtAdmission) {
  RingLink link(1);
  auto big = make_job(1, 8, {4'000'000});
  big.quota_bytes = 1 << 20;
  auto cfg = make_config(link.server_name(), 1, {big});
  auto e = engine::Engine::create(cfg);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("job 'job1' (id 1) refused"), std::string::npos) << e.error();
  EXPECT_NE(e.error().find("quota"), std::string::npos) << e.error();

  cfg.jobs[0].quota_bytes = 1ull << 32;
  cfg.limits.memory_bytes = 8 << 20;
  auto f = engine::Engine::create(cfg);
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.error().find("memory limit"), std::string::npos) << f.error();
}

}  // namespace
}  // namespace phub::test
