// Engine tests on net_ring: ARP/ICMP (rate limit, refused sources), the software UDP checksum, pull of an
// allreduce job, exact allreduce over worker counts, dtypes, lcores and modes,
// duplicates, late pushes, re-requests, round errors, stalls, ps init and steps, bad segments, and where the
// pools and the lcores' state are placed.
#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_memory.h>
#include <rte_mempool.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <thread>

#include "harness.hpp"
#include "phub/base/bytes.hpp"
#include "phub/engine/lcore_job.hpp"
#include "phub/proto/arp_icmp.hpp"

namespace phub::test {
namespace {

using engine::Drop;

std::vector<float> segment_values(const proto::Layout& l, uint32_t chunk, uint32_t seg, uint32_t round, uint16_t rank) {
  const uint32_t off = l.segment_offset(seg);
  std::vector<float> v(l.segment_count_elems(l.chunk(chunk), seg));
  for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(rank, round, chunk, off + i);
  return v;
}

void push_segment(StartedEngine& s, size_t j, uint32_t chunk, uint32_t seg, uint32_t round, uint16_t rank) {
  const auto& job = s.cfg.jobs[j];
  const auto& l = s.layout(j);
  s.workers->send(job, rank, push_header(l, chunk, seg, round, rank, job.dtype),
                  encode(segment_values(l, chunk, seg, round, rank), job.dtype));
}

// Every rank pushes every segment of every chunk for `round`, in a shuffled order.
size_t push_round(StartedEngine& s, size_t j, uint32_t round, std::mt19937& rng, uint16_t skip_rank = UINT16_MAX) {
  const auto& l = s.layout(j);
  std::vector<std::tuple<uint32_t, uint32_t, uint16_t>> all;
  size_t segments = 0;
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
      for (uint16_t r = 0; r < s.cfg.jobs[j].workers; ++r) {
        if (r != skip_rank) all.emplace_back(c, seg, r);
      }
    }
  }
  std::shuffle(all.begin(), all.end(), rng);
  for (auto [c, seg, r] : all) push_segment(s, j, c, seg, round, r);
  return segments;
}

// Checks every result of a round against the exact sum (or mean) and that every rank got every segment.
void expect_results(StartedEngine& s, size_t j, uint32_t round, const std::vector<Received>& got, size_t segments) {
  const auto& job = s.cfg.jobs[j];
  const auto& l = s.layout(j);
  ASSERT_EQ(got.size(), segments * job.workers);
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, int> seen;
  for (const auto& r : got) {
    ASSERT_EQ(r.hdr.opcode, proto::Opcode::result) << proto::status_name(r.hdr.status);
    ASSERT_EQ(r.hdr.round, round);
    ASSERT_EQ(r.dst_port, 50000 + s.workers->udp_port_shift + r.hdr.rank);
    ASSERT_EQ(r.dst_ip, kServerIp + 100 + s.workers->ip_shift + r.hdr.rank);
    const uint32_t seg = r.hdr.elem_offset / l.params().segment_elems;
    ++seen[{r.hdr.chunk_id, seg, r.hdr.rank}];
    const auto values = decode(r.payload, job.dtype);
    ASSERT_EQ(values.size(), l.segment_count_elems(l.chunk(r.hdr.chunk_id), seg));
    for (uint32_t i = 0; i < values.size(); ++i) {
      float sum = 0;
      for (uint16_t k = 0; k < job.workers; ++k) sum += gradient(k, round, r.hdr.chunk_id, r.hdr.elem_offset + i);
      const float exact = job.reduce == config::Reduce::mean ? sum * (1.0f / job.workers) : sum;
      // What the server sends: the fp32 value narrowed to the job's dtype (round to nearest even).
      std::byte narrow[4];
      agg::kernels_for(agg::Isa::scalar).narrow(narrow, &exact, job.dtype, 1);
      const float expect = decode(std::vector<std::byte>(narrow, narrow + dtype_bytes(job.dtype)), job.dtype)[0];
      ASSERT_EQ(values[i], expect) << "chunk " << r.hdr.chunk_id << " elem " << r.hdr.elem_offset + i;
    }
  }
  EXPECT_EQ(seen.size(), segments * job.workers);
}

TEST(Engine, AnswersArpAndPing) {
  StartedEngine s(1, {make_job(1, 2, {1000})});
  std::array<std::byte, proto::kArpFrameBytes> arp{};
  (void)proto::build_arp_request({2, 0x77, 0, 0, 0, 9}, kServerIp + 9, kServerIp, arp);
  s.workers->send_frame({arp.begin(), arp.end()}, 0);
  (void)s.workers->receive(1, std::chrono::milliseconds(300));
  ASSERT_EQ(s.workers->other.size(), 1u);
  auto l2 = proto::parse_l2(s.workers->other[0]);
  ASSERT_TRUE(l2.has_value());
  auto reply = proto::parse_arp(s.workers->other[0], *l2);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->op, proto::ArpOp::reply);
  EXPECT_EQ(reply->sender_ip, kServerIp);
  EXPECT_EQ(reply->sender_mac, s.workers->server_mac());
  EXPECT_EQ(s.engine->totals().lcores.arp_replies, 1u);

  // An ARP request for another address is not answered.
  (void)proto::build_arp_request({2, 0x77, 0, 0, 0, 9}, kServerIp + 9, kServerIp + 1, arp);
  s.workers->send_frame({arp.begin(), arp.end()}, 0);
  (void)s.workers->receive(1, std::chrono::milliseconds(200));
  EXPECT_EQ(s.workers->other.size(), 1u);
}

// An ICMP echo request from (src_mac, src_ip) to the server.
std::vector<std::byte> echo_request(const MacAddr& src_mac, uint32_t src_ip, const MacAddr& server_mac, uint16_t seq) {
  constexpr size_t kData = 32;
  std::vector<std::byte> f(proto::kEthBytes + proto::kIpv4Bytes + 8 + kData);
  proto::FlowAddrs a;
  a.src_mac = src_mac;
  a.dst_mac = server_mac;
  a.src_ip = src_ip;
  a.dst_ip = kServerIp;
  proto::write_eth_ipv4_udp(a, 0, f);  // then turn the UDP header into ICMP
  std::byte* ip = f.data() + proto::kEthBytes;
  store_be<uint16_t>(ip + 2, static_cast<uint16_t>(proto::kIpv4Bytes + 8 + kData));
  ip[9] = std::byte{proto::kIpProtoIcmp};
  store_be<uint16_t>(ip + 10, 0);
  store_be<uint16_t>(ip + 10, proto::inet_checksum(std::span<const std::byte>(ip, proto::kIpv4Bytes)));
  std::byte* icmp = ip + proto::kIpv4Bytes;
  std::memset(icmp, 0, 8);
  icmp[0] = std::byte{8};
  store_be<uint16_t>(icmp + 4, 0x1234);
  store_be<uint16_t>(icmp + 6, seq);
  for (size_t i = 0; i < kData; ++i) icmp[8 + i] = static_cast<std::byte>(i);
  store_be<uint16_t>(icmp + 2, proto::inet_checksum(std::span<const std::byte>(icmp, 8 + kData)));
  return f;
}

std::vector<std::byte> arp_request(const MacAddr& src_mac, uint32_t src_ip, uint32_t target_ip = kServerIp) {
  std::array<std::byte, proto::kArpFrameBytes> arp{};
  (void)proto::build_arp_request(src_mac, src_ip, target_ip, arp);
  return {arp.begin(), arp.end()};
}

// The ARP replies and ICMP echo replies among the frames the workers' side collected.
std::pair<size_t, size_t> count_answers(const std::vector<std::vector<std::byte>>& frames) {
  size_t arp = 0, icmp = 0;
  for (const auto& f : frames) {
    auto l2 = proto::parse_l2(f);
    if (!l2) continue;
    if (l2->ether_type == proto::kEtherTypeArp) {
      auto a = proto::parse_arp(f, *l2);
      if (a && a->op == proto::ArpOp::reply) ++arp;
    } else if (l2->ether_type == proto::kEtherTypeIpv4) {
      auto ip = proto::parse_ipv4(f, *l2);
      if (ip && ip->protocol == proto::kIpProtoIcmp && static_cast<uint8_t>(f[ip->l4_offset]) == 0) ++icmp;
    }
  }
  return {arp, icmp};
}

// Waits until the server counted `n` ARP/ICMP requests (answered or refused), then collects what it sent.
void settle(StartedEngine& s, uint64_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto t = s.engine->totals().lcores;
    const uint64_t seen = t.arp_replies + t.icmp_replies + t.drops[static_cast<size_t>(Drop::reply_rate_limited)] +
                          t.drops[static_cast<size_t>(Drop::reply_source_refused)];
    if (seen >= n || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (void)s.workers->receive(1, std::chrono::milliseconds(200));  // the replies land in workers->other
}

// A burst far above the bucket gets the bucket's worth of answers (plus what the refill adds while the
// lcore works through it: at 1 per second, at most one more per second the test took), the rest are counted.
TEST(Engine, ArpAndPingAnswersAreRateLimitedPerPort) {
  constexpr uint32_t kBurst = 5;
  constexpr size_t kSent = 60;
  auto tweak = [](config::Config& c) {
    c.limits.arp_icmp_per_s = 1;
    c.limits.arp_icmp_burst = kBurst;
  };
  for (const bool ping : {false, true}) {
    StartedEngine s(1, {make_job(1, 2, {1000})}, tweak);
    const MacAddr worker{2, 0x77, 0, 0, 0, 9};
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < kSent; ++i) {
      s.workers->send_frame(ping ? echo_request(worker, kServerIp + 9, s.workers->server_mac(), static_cast<uint16_t>(i))
                                 : arp_request(worker, kServerIp + 9),
                            0);
    }
    settle(s, kSent);
    const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto [arp, icmp] = count_answers(s.workers->other);
    const size_t answered = ping ? icmp : arp;
    EXPECT_EQ(ping ? arp : icmp, 0u);
    EXPECT_GE(answered, kBurst) << (ping ? "ping" : "arp");
    EXPECT_LE(answered, kBurst + static_cast<size_t>(took_s) + 1) << (ping ? "ping" : "arp") << ", " << took_s << " s";
    EXPECT_EQ(drops(*s.engine, Drop::reply_rate_limited), kSent - answered);
    const auto t = s.engine->totals().lcores;
    EXPECT_EQ(ping ? t.icmp_replies : t.arp_replies, answered);
  }
}

TEST(Engine, ArpAndPingFromGroupOrUnspecifiedSourcesAreNotAnswered) {
  StartedEngine s(1, {make_job(1, 2, {1000})});
  const MacAddr worker{2, 0x77, 0, 0, 0, 9};
  const MacAddr multicast{0x01, 0x00, 0x5e, 0, 0, 5};
  const MacAddr mac = s.workers->server_mac();
  const std::vector<std::vector<std::byte>> refused = {
      arp_request(multicast, kServerIp + 9),
      arp_request(kBroadcastMac, kServerIp + 9),
      arp_request(worker, 0),                   // an ARP probe's unspecified source
      arp_request(worker, 0xe0000005),          // 224.0.0.5
      arp_request(worker, 0xffffffff),          // limited broadcast
      arp_request(worker, kServerIp | 0xff),    // the port's subnet broadcast (/24)
      echo_request(multicast, kServerIp + 9, mac, 1),
      echo_request(kBroadcastMac, kServerIp + 9, mac, 2),
      echo_request(worker, 0, mac, 3),
      echo_request(worker, 0xe0000005, mac, 4),
      echo_request(worker, 0xffffffff, mac, 5),
      echo_request(worker, kServerIp | 0xff, mac, 6),
  };
  for (const auto& f : refused) s.workers->send_frame(f, 0);
  settle(s, refused.size());
  EXPECT_EQ(s.workers->other.size(), 0u);
  EXPECT_EQ(drops(*s.engine, Drop::reply_source_refused), refused.size());

  // A worker's own ARP request and ping are answered (the default limits: 50 at once).
  s.workers->send_frame(arp_request(worker, kServerIp + 9), 0);
  s.workers->send_frame(echo_request(worker, kServerIp + 9, mac, 7), 0);
  settle(s, refused.size() + 2);
  const auto [arp, icmp] = count_answers(s.workers->other);
  EXPECT_EQ(arp, 1u);
  EXPECT_EQ(icmp, 1u);
  EXPECT_EQ(drops(*s.engine, Drop::reply_rate_limited), 0u);
}

// The whole frame of `rank`'s push of segment 0 of chunk 0, round 0, of the first job, with its UDP checksum.
std::vector<std::byte> first_push_frame(StartedEngine& s, uint16_t rank) {
  const auto& job = s.cfg.jobs[0];
  const auto& l = s.layout(0);
  const auto payload = encode(segment_values(l, 0, 0, 0, rank), job.dtype);
  std::vector<std::byte> f(proto::kFrameHeadersBytes + payload.size());
  proto::Header h = push_header(l, 0, 0, 0, rank, job.dtype);
  h.job_id = job.id;
  EXPECT_TRUE(proto::build_phub_frame(s.workers->addrs(rank, job.port_base), h, payload, f).has_value());
  return f;
}

// A push whose payload was corrupted on the way (the UDP checksum no longer matches) is dropped before it is
// summed; the round completes with the good retransmit. A 0 checksum (none) is accepted.
TEST(Engine, UdpChecksumIsVerifiedWhenThePmdDidNot) {
  StartedEngine s(1, {make_job(1, 2, {352})});
  constexpr size_t kUdpChecksumAt = proto::kEthBytes + proto::kIpv4Bytes + 6;
  auto good0 = first_push_frame(s, 0);
  ASSERT_NE(load_be<uint16_t>(good0.data() + kUdpChecksumAt), 0u);
  auto corrupt = good0;
  corrupt[proto::kFrameHeadersBytes + 5] ^= std::byte{0x40};  // one bit of the first element
  s.workers->send_frame(corrupt, 0);
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(drops(*s.engine, Drop::udp_checksum_bad), 1u);
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 0u);

  s.workers->send_frame(good0, 0);  // the retransmit, checksum right
  auto zero1 = first_push_frame(s, 1);
  store_be<uint16_t>(zero1.data() + kUdpChecksumAt, 0);  // no checksum
  s.workers->send_frame(zero1, 0);
  auto got = s.workers->receive(2);
  expect_results(s, 0, 0, got, 1);  // the exact sum: the corrupted element was never added
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 2u);
  EXPECT_EQ(drops(*s.engine, Drop::udp_checksum_bad), 1u);
}

// ports[].udp_checksum = "trust": the PMD's verdict only (UNKNOWN is accepted as it comes).
TEST(Engine, UdpChecksumTrustSkipsTheSoftwareCheck) {
  StartedEngine s(1, {make_job(1, 1, {352})}, [](config::Config& c) { c.ports[0].udp_checksum = config::UdpChecksum::trust; });
  const auto& job = s.cfg.jobs[0];
  auto f = first_push_frame(s, 0);
  f[proto::kFrameHeadersBytes + 5] ^= std::byte{0x40};
  s.workers->send_frame(f, 0);
  auto got = s.workers->receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(drops(*s.engine, Drop::udp_checksum_bad), 0u);
  EXPECT_NE(decode(got[0].payload, job.dtype)[1], gradient(0, 0, 0, 1));  // what came, summed unchecked
}

// Checksum flags on a port that did not ask for the receive offloads are not a verdict: net_ring has none and
// passes the sender's mbuf on with whatever flags it carries. A corrupted push marked GOOD is still checked
// (and dropped), as is an IPv4 header whose checksum is wrong.
TEST(Engine, ChecksumFlagsAreTrustedOnlyWhereThePortAskedForTheOffload) {
  StartedEngine s(1, {make_job(1, 2, {352})});
  ASSERT_FALSE(s.engine->ports()[0]->rx_udp_checksum_offload());
  ASSERT_FALSE(s.engine->ports()[0]->rx_ipv4_checksum_offload());
  const auto good = first_push_frame(s, 0);
  constexpr uint64_t kGood = RTE_MBUF_F_RX_IP_CKSUM_GOOD | RTE_MBUF_F_RX_L4_CKSUM_GOOD;

  auto udp_corrupt = good;
  udp_corrupt[proto::kFrameHeadersBytes + 5] ^= std::byte{0x40};  // one bit of the first element
  s.workers->send_frame(udp_corrupt, 0, kGood);
  auto ip_corrupt = good;
  ip_corrupt[proto::kEthBytes + 8] ^= std::byte{1};  // the TTL, under the IPv4 header checksum
  s.workers->send_frame(ip_corrupt, 0, kGood);
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(drops(*s.engine, Drop::udp_checksum_bad), 1u);
  EXPECT_EQ(malformed(*s.engine, proto::ParseError::ipv4_bad_checksum), 1u);
  EXPECT_EQ(job_counters(*s.engine, 0).pushes, 0u);
}

// pull is a ps opcode: an allreduce job answers it with a header-only bad_request, never with data.
TEST(Engine, PullOfAnAllreduceJobIsABadRequest) {
  StartedEngine s(1, {make_job(1, 2, {352})});
  const auto& job = s.cfg.jobs[0];
  push_segment(s, 0, 0, 0, 0, 0);
  push_segment(s, 0, 0, 0, 0, 1);
  ASSERT_EQ(s.workers->receive(2).size(), 2u);  // round 0 done: the chunk has a previous result
  proto::Header p = push_header(s.layout(0), 0, 0, 0, 0, job.dtype);
  p.opcode = proto::Opcode::pull;
  p.elem_offset = 0;
  p.elem_count = 0;
  s.workers->send(job, 0, p, {});
  auto got = s.workers->receive(2, std::chrono::milliseconds(300));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].hdr.opcode, proto::Opcode::error);
  EXPECT_EQ(got[0].hdr.status, proto::Status::bad_request);
  EXPECT_TRUE(got[0].payload.empty());
  EXPECT_EQ(drops(*s.engine, Drop::bad_request), 1u);
  EXPECT_EQ(job_counters(*s.engine, 0).pulls, 0u);
}

struct Shape {
  uint16_t lcores;
  uint16_t workers;
  Dtype dtype;
  bool deterministic;
  bool mean;
};

class Allreduce : public ::testing::TestWithParam<Shape> {};

TEST_P(Allreduce, EveryResultIsExactForThreeRounds) {
  const Shape p = GetParam();
  auto job = make_job(1, p.workers, {20000, 7, 9000}, p.dtype);
  job.deterministic = p.deterministic;
  job.reduce = p.mean ? config::Reduce::mean : config::Reduce::sum;
  job.chunk_bytes = 16384;
  StartedEngine s(p.lcores, {job});
  std::mt19937 rng(p.workers * 31 + p.lcores);
  for (uint32_t round = 0; round < 3; ++round) {
    const size_t segments = push_round(s, 0, round, rng);
    auto got = s.workers->receive(segments * p.workers);
    expect_results(s, 0, round, got, segments);
  }
  const auto c = job_counters(*s.engine, 0);
  EXPECT_EQ(c.rounds_completed, 3u * s.layout(0).chunk_count());
  EXPECT_EQ(c.duplicates, 0u);
  if (p.lcores > 1) {
    EXPECT_EQ(s.engine->totals().lcores.redirected_out, 0u);  // the ring sender picks the owner's queue
  }
  // Every result was received and freed: its header mbuf and its share of the payload mbuf (one per
  // segment, shared by all recipients) are back in their pools.
  EXPECT_EQ(s.engine->transmit_mbufs_in_use(), 0u);
  // The report's pool gauges (phub-ctl stats) say the same for the transmit pools; every pool adds up.
  const auto r = s.engine->report();
  // (Pool names carry the engine's prefix: phub_ for the first engine of a process, phubN_ after it.)
  ASSERT_TRUE(std::any_of(r.pools.begin(), r.pools.end(), [](const auto& q) { return q.name.ends_with("_hdr"); }));
  for (const auto& pool : r.pools) {
    EXPECT_EQ(pool.in_use + pool.avail, pool.size) << pool.name;
    if (pool.name.find("_rx") == std::string::npos) {
      EXPECT_EQ(pool.in_use, 0u) << pool.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Allreduce,
                         ::testing::Values(Shape{1, 2, Dtype::fp32, false, false}, Shape{2, 4, Dtype::fp32, false, true},
                                           Shape{2, 8, Dtype::bf16, false, false}, Shape{1, 4, Dtype::fp16, false, true},
                                           Shape{2, 8, Dtype::fp32, true, false}, Shape{2, 3, Dtype::bf16, true, true}));

// ports[].tx_copy: net_ring sends chains, so results go zero-copy (a header chained to the shared result
// buffer) unless the port asks for copies; then every result is its own frame, and the sums are the same.
TEST(Engine, TxCopyCopiesEveryResultIntoItsOwnFrame) {
  for (const bool copy : {false, true}) {
    SCOPED_TRACE(copy ? "tx_copy = true" : "tx_copy = false");
    StartedEngine s(1, {make_job(1, 3, {9000, 5})}, [&](config::Config& c) { c.ports[0].tx_copy = copy; });
    std::mt19937 rng(7);
    for (uint32_t round = 0; round < 2; ++round) {
      const size_t segments = push_round(s, 0, round, rng);
      expect_results(s, 0, round, s.workers->receive(segments * 3), segments);
    }
    const uint64_t sent = job_counters(*s.engine, 0).results_sent;
    EXPECT_GT(sent, 0u);
    EXPECT_EQ(s.engine->totals().lcores.results_copied, copy ? sent : 0u);
    EXPECT_EQ(s.engine->transmit_mbufs_in_use(), 0u);
  }
}

// The server keeps each worker's frame headers from one result to the next: when the workers move (new
// UDP ports, then new addresses) the results follow them, with valid IPv4 and UDP lengths and checksums
// (parse_phub_frame checks them), also for the short last segments of each key.
TEST(Engine, ResultsFollowWorkersThatMove) {
  auto job = make_job(1, 4, {5000, 9}, Dtype::fp32);
  job.chunk_bytes = 8192;
  StartedEngine s(2, {job});
  std::mt19937 rng(7);
  for (uint32_t round = 0; round < 3; ++round) {
    if (round == 1) s.workers->udp_port_shift = 1000;
    if (round == 2) s.workers->ip_shift = 20;
    const size_t segments = push_round(s, 0, round, rng);
    auto got = s.workers->receive(segments * job.workers);
    expect_results(s, 0, round, got, segments);
  }
}

TEST(Engine, DuplicatesLatePushesRerequestsAndRoundErrors) {
  StartedEngine s(1, {make_job(1, 2, {352})});
  const auto& job = s.cfg.jobs[0];
  for (uint16_t r = 0; r < 2; ++r) s.workers->prove(job, r);  // answers beyond what each rank sent
  push_segment(s, 0, 0, 0, 0, 0);
  push_segment(s, 0, 0, 0, 0, 0);  // duplicate: ignored
  EXPECT_TRUE(s.workers->receive(1, std::chrono::milliseconds(100)).empty());
  push_segment(s, 0, 0, 0, 0, 1);
  auto r0 = s.workers->receive(2);
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(job_counters(*s.engine, 0).duplicates, 1u);

  // Round 0 is complete; a late push of round 0 gets the round-0 result again, unchanged.
  push_segment(s, 0, 0, 0, 0, 1);
  auto late = s.workers->receive(1);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].hdr.round, 0u);
  EXPECT_EQ(late[0].payload, r0[0].payload);

  // A re-request of round 0 (the previous round) likewise.
  proto::Header rr = push_header(s.layout(0), 0, 0, 0, 1, job.dtype);
  rr.opcode = proto::Opcode::rerequest;
  rr.elem_count = 0;  // whole chunk
  s.workers->send(job, 1, rr, {});
  auto again = s.workers->receive(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].payload, r0[0].payload);

  // Too far ahead and too far behind get error packets naming the server's round.
  push_segment(s, 0, 0, 0, 5, 0);
  auto ahead = s.workers->receive(1);
  ASSERT_EQ(ahead.size(), 1u);
  EXPECT_EQ(ahead[0].hdr.opcode, proto::Opcode::error);
  EXPECT_EQ(ahead[0].hdr.status, proto::Status::round_ahead);
  EXPECT_EQ(ahead[0].hdr.aux, 1u);
  push_segment(s, 0, 0, 0, 1, 0);
  push_segment(s, 0, 0, 0, 1, 1);
  ASSERT_EQ(s.workers->receive(2).size(), 2u);
  push_segment(s, 0, 0, 0, 0, 0);  // now two rounds behind
  auto behind = s.workers->receive(1);
  ASSERT_EQ(behind.size(), 1u);
  EXPECT_EQ(behind[0].hdr.status, proto::Status::round_behind);
  EXPECT_EQ(drops(*s.engine, Drop::round_ahead), 1u);
  EXPECT_EQ(drops(*s.engine, Drop::round_behind), 1u);
}

TEST(Engine, StalledRoundIsReportedToContributors) {
  StartedEngine s(1, {make_job(1, 4, {100})});
  // Proven: stall reports do not spend the credit the ranks' results need (see Amplification below).
  for (uint16_t r = 0; r < 4; ++r) s.workers->prove(s.cfg.jobs[0], r);
  std::mt19937 rng(1);
  (void)push_round(s, 0, 0, rng, /*skip_rank=*/2);
  auto errs = s.workers->receive(3, std::chrono::milliseconds(1500));
  ASSERT_EQ(errs.size(), 3u);
  for (const auto& e : errs) {
    EXPECT_EQ(e.hdr.opcode, proto::Opcode::error);
    EXPECT_EQ(e.hdr.status, proto::Status::round_stalled);
    EXPECT_EQ(e.hdr.aux, 2u);
    EXPECT_NE(e.hdr.rank, 2u);
  }
  EXPECT_GE(job_counters(*s.engine, 0).stalls_reported, 1u);
  // The straggler arrives: the round completes normally.
  push_segment(s, 0, 0, 0, 0, 2);
  auto got = s.workers->receive(4);
  size_t results = 0;
  for (const auto& r : got) results += r.hdr.opcode == proto::Opcode::result;
  EXPECT_EQ(results, 4u);
}

TEST(Engine, ParameterServerInitThenSgdSteps) {
  auto job = make_job(1, 2, {1000});
  job.mode = config::JobMode::ps;
  job.reduce = config::Reduce::mean;
  job.optimizer.kind = config::OptimizerKind::sgd;
  job.optimizer.lr = 0.25f;
  StartedEngine s(2, {job});
  const auto& l = s.layout(0);

  push_segment(s, 0, 0, 0, 0, 1);
  auto early = s.workers->receive(1);
  ASSERT_EQ(early.size(), 1u);
  EXPECT_EQ(early[0].hdr.status, proto::Status::not_initialized);

  std::vector<float> w(1000);
  for (uint32_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13);
  size_t segments = 0;
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
      proto::Header h = push_header(l, c, seg, 0, 0, Dtype::fp32);
      h.opcode = proto::Opcode::init;
      const auto off = l.chunk(c).key_offset + l.segment_offset(seg);
      s.workers->send(s.cfg.jobs[0], 0, h,
                      encode(std::vector<float>(w.begin() + off, w.begin() + off + h.elem_count), Dtype::fp32));
    }
  }
  auto acks = s.workers->receive(segments);
  ASSERT_EQ(acks.size(), segments);
  std::mt19937 rng(5);
  for (uint32_t round = 0; round < 2; ++round) {
    (void)push_round(s, 0, round, rng);
    auto got = s.workers->receive(segments * 2);
    ASSERT_EQ(got.size(), segments * 2);
    for (const auto& r : got) {
      ASSERT_EQ(r.hdr.opcode, proto::Opcode::result);
      const auto values = decode(r.payload, Dtype::fp32);
      for (uint32_t i = 0; i < values.size(); ++i) {
        const uint32_t e = l.chunk(r.hdr.chunk_id).key_offset + r.hdr.elem_offset + i;
        float sum = gradient(0, round, r.hdr.chunk_id, r.hdr.elem_offset + i) +
                    gradient(1, round, r.hdr.chunk_id, r.hdr.elem_offset + i);
        ASSERT_EQ(values[i], w[e] - 0.25f * (sum * 0.5f)) << "round " << round << " elem " << e;
      }
    }
    for (uint32_t e = 0; e < w.size(); ++e) {
      const auto& ci = l.chunk(static_cast<uint32_t>(e / l.params().chunk_elems));
      const uint32_t in_chunk = static_cast<uint32_t>(e - ci.key_offset);
      w[e] = w[e] - 0.25f * ((gradient(0, round, e / l.params().chunk_elems, in_chunk) +
                              gradient(1, round, e / l.params().chunk_elems, in_chunk)) * 0.5f);
    }
  }
  // A pull returns the current weights.
  proto::Header pull = push_header(l, 0, 0, 0, 1, Dtype::fp32);
  pull.opcode = proto::Opcode::pull;
  s.workers->send(s.cfg.jobs[0], 1, pull, {});
  auto pulled = s.workers->receive(1);
  ASSERT_EQ(pulled.size(), 1u);
  EXPECT_EQ(decode(pulled[0].payload, Dtype::fp32)[3], w[3]);
}

TEST(Engine, WrongSegmentOrDtypeGetsBadRequest) {
  StartedEngine s(1, {make_job(1, 2, {1000})});
  const auto& job = s.cfg.jobs[0];
  proto::Header h = push_header(s.layout(0), 0, 0, 0, 0, Dtype::fp32);
  h.elem_count = 100;  // a segment is 352 elements
  s.workers->send(job, 0, h, encode(std::vector<float>(100, 1.0f), Dtype::fp32));
  auto e = s.workers->receive(1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].hdr.status, proto::Status::bad_request);
  EXPECT_EQ(e[0].hdr.aux, 352u);
  h = push_header(s.layout(0), 0, 0, 0, 0, Dtype::bf16);
  s.workers->send(job, 0, h, encode(std::vector<float>(h.elem_count, 1.0f), Dtype::bf16));
  e = s.workers->receive(1);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].hdr.status, proto::Status::bad_request);
  EXPECT_EQ(drops(*s.engine, Drop::bad_segment), 1u);
  EXPECT_EQ(drops(*s.engine, Drop::dtype_mismatch), 1u);
}

TEST(Engine, MisdeliveredPacketsAreHandedToTheirOwner) {
  auto job = make_job(1, 2, {40000});
  StartedEngine s(2, {job});
  const auto& l = s.layout(0);
  // Send every push on queue 0 even where lcore 1 owns the chunk: the ring hand-off delivers it.
  size_t segments = 0, foreign = 0;
  for (uint32_t c = 0; c < l.chunk_count(); ++c) {
    for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
      for (uint16_t r = 0; r < 2; ++r) {
        proto::Header h = push_header(l, c, seg, 0, r, Dtype::fp32);
        h.job_id = job.id;
        std::vector<std::byte> frame(proto::kFrameHeadersBytes + h.elem_count * 4u);
        auto n = proto::build_phub_frame(s.workers->addrs(r, static_cast<uint16_t>(job.port_base + l.chunk(c).owner)), h,
                                         encode(segment_values(l, c, seg, 0, r), Dtype::fp32), frame);
        ASSERT_TRUE(n.has_value());
        s.workers->send_frame(frame, 0);
        foreign += l.chunk(c).owner != 0;
      }
    }
  }
  auto got = s.workers->receive(segments * 2);
  expect_results(s, 0, 0, got, segments);
  EXPECT_EQ(s.engine->totals().lcores.redirected_out, foreign);
  EXPECT_EQ(s.engine->totals().lcores.redirected_in, foreign);
}

}  // namespace
}  // namespace phub::test

namespace phub::test {
namespace {

// Cross-rack aggregation does not exist yet: a config that asks for it is refused with the reason, not
// run flat (which would let the other racks' workers stall).
// Frame bytes of what the workers received (the same Ethernet/IPv4/UDP headers as the requests').
size_t frame_bytes(const std::vector<Received>& got) {
  size_t n = 0;
  for (const auto& r : got) n += proto::kFrameHeadersBytes + r.payload.size();
  return n;
}

proto::Header whole_chunk_request(const proto::Layout& l, proto::Opcode op, uint32_t round, uint16_t rank) {
  proto::Header h = push_header(l, 0, 0, round, rank, Dtype::fp32);
  h.opcode = op;
  h.elem_count = 0;  // every segment of the chunk
  return h;
}

// A rank that never joined (phub-pktgen, a replayed trace, a spoofed source) pays for every result with a
// push of the same size; its one-header rerequests get no more bytes than they carry until the address
// cookie of a join proves that it receives at its address.
TEST(Amplification, AnUnprovenSourceGetsNoMoreBytesThanItSent) {
  auto job = make_job(1, 2, {352 * 8});
  StartedEngine s(1, {job});
  const auto& l = s.layout(0);
  ASSERT_EQ(l.chunk(0).segments, 8u);
  std::mt19937 rng(3);
  const size_t segments = push_round(s, 0, 0, rng);
  ASSERT_EQ(s.workers->receive(segments * 2).size(), segments * 2) << "pushes pay for their results";

  const size_t requests = 20;
  for (size_t i = 0; i < requests; ++i) {
    s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {});
  }
  const auto got = s.workers->receive(requests * segments, std::chrono::milliseconds(500));
  const size_t in = requests * proto::kFrameHeadersBytes;
  EXPECT_GT(frame_bytes(got), 0u) << "the credit of 20 headers covers one result segment";
  EXPECT_LE(frame_bytes(got), in) << "bytes out per byte in: " << static_cast<double>(frame_bytes(got)) / in;
  EXPECT_GT(drops(*s.engine, Drop::unproven_limit), 0u);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_proven, 0u);

  // Proven by the cookie of its join, the same request gets the whole chunk.
  s.workers->prove(job, 1);
  s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {});
  const auto full = s.workers->receive(segments);
  ASSERT_EQ(full.size(), segments);
  for (const auto& r : full) EXPECT_EQ(r.hdr.opcode, proto::Opcode::result);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_proven, 1u);
}

// A job's answer_bytes_per_s counts the bytes its answers to requests send, not the requests: a proven
// worker asking for a whole chunk (about 12 KB) 200 times a second with a 96-byte rerequest gets no more than
// the limit (and the bucket's burst), and what is over it is counted against the job.
TEST(Amplification, AnswersToRequestsStayWithinTheJobsBytesPerSecond) {
  constexpr uint64_t kLimit = 200'000;  // bytes a second; one lcore holds the whole share
  auto job = make_job(1, 2, {352 * 8});
  job.answer_bytes_per_s = kLimit;
  StartedEngine s(1, {job});
  const auto& l = s.layout(0);
  std::mt19937 rng(5);
  const size_t segments = push_round(s, 0, 0, rng);
  ASSERT_EQ(s.workers->receive(segments * 2).size(), segments * 2) << "a round's results are not answers";
  s.workers->prove(job, 1);

  const auto start = std::chrono::steady_clock::now();
  size_t requests = 0, answered = 0;
  std::vector<Received> got;
  while (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) {
    s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {});
    ++requests;
    auto some = s.workers->receive(segments, std::chrono::milliseconds(5));
    got.insert(got.end(), some.begin(), some.end());
  }
  auto rest = s.workers->receive(segments * requests, std::chrono::milliseconds(300));
  got.insert(got.end(), rest.begin(), rest.end());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& r : got) answered += r.hdr.opcode == proto::Opcode::result ? 1 : 0;
  const double asked = static_cast<double>(requests * segments * (proto::kFrameHeadersBytes + 352 * 4));
  const double out = static_cast<double>(frame_bytes(got));
  const double allowed = static_cast<double>(kLimit) * seconds + engine::LcoreJob::kAnswerMinBurstBytes;
  std::printf("answers: %zu requests asked %.0f bytes in %.2f s; %zu results, %.0f bytes sent (limit %.0f)\n", requests,
              asked, seconds, answered, out, allowed);
  ASSERT_GT(asked, 3 * allowed) << "the requests must ask for far more than the limit";
  EXPECT_LE(out, allowed);
  EXPECT_GE(out, 0.3 * static_cast<double>(kLimit) * seconds) << "the limit is a rate, not a refusal";
  EXPECT_GT(drops(*s.engine, Drop::answer_rate_limited), 0u);
  EXPECT_EQ(job_counters(*s.engine, 0).results_resent, answered);
}

// A proven address (a worker joined there and carried its cookie) is the rank's until the holder joins
// again: a packet of the rank from elsewhere (replayed or spoofed, here a rerequest) is answered at the
// proven address, and nothing goes to the new one. A fresh join from the new address moves the rank there.
TEST(Hijack, AProvenAddressMovesOnlyByAFreshJoin) {
  auto job = make_job(1, 2, {352 * 4});
  StartedEngine s(1, {job});
  const auto& l = s.layout(0);
  s.workers->prove(job, 0);
  s.workers->prove(job, 1);
  std::mt19937 rng(5);
  const size_t segments = push_round(s, 0, 0, rng);
  ASSERT_EQ(s.workers->receive(segments * 2).size(), segments * 2);

  s.workers->udp_port_shift = 100;  // a rerequest of rank 1 from another UDP port
  s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {});
  auto got = s.workers->receive(segments);
  ASSERT_EQ(got.size(), segments) << "answered, at the proven address";
  for (const auto& r : got) EXPECT_EQ(r.dst_port, 50000 + 1) << "not at the new one";
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_kept, 1u);
  EXPECT_EQ(drops(*s.engine, Drop::unproven_limit), 0u);

  s.workers->prove(job, 1);  // the holder joins from the new address: it moves, and proves itself there
  s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {});
  got = s.workers->receive(segments);
  ASSERT_EQ(got.size(), segments);
  for (const auto& r : got) EXPECT_EQ(r.dst_port, 50100 + 1);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_proven, 3u);
}

// A join of the holder recorded and replayed from another address (its seq is not later than the join that
// set the proven address) moves nothing; its `joined` answer is one header to its sender. Nor does a leave
// of the holder from elsewhere silence the rank.
TEST(Hijack, AReplayedJoinDoesNotMoveAProvenAddress) {
  auto job = make_job(1, 2, {352 * 2});
  job.secret = "hijack-test-secret-0123456789";
  StartedEngine s(1, {job});
  const auto& l = s.layout(0);
  s.workers->prove(job, 0);
  s.workers->prove(job, 1);
  const uint32_t join_seq = s.workers->last_seq();
  std::mt19937 rng(9);
  const size_t segments = push_round(s, 0, 0, rng);  // the pushes carry the cookies: both addresses proven
  ASSERT_EQ(s.workers->receive(segments * 2).size(), segments * 2);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_proven, 2u);

  proto::Header join;
  join.opcode = proto::Opcode::join;
  join.rank = 1;
  join.aux = 1000u + 1;    // the holder's incarnation (Workers::prove)
  join.seq = join_seq;     // the recorded join, byte for byte
  s.workers->ip_shift = 7; // from another host
  s.workers->send(job, 1, join, {}, "\x01");
  auto answer = s.workers->receive(1);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_EQ(answer[0].hdr.opcode, proto::Opcode::joined);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_kept, 1u);
  proto::Header leave;
  leave.opcode = proto::Opcode::leave;
  leave.rank = 1;
  leave.aux = 1000u + 1;
  s.workers->send(job, 1, leave, {});
  for (int i = 0; i < 200 && job_counters(*s.engine, 0).leaves == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the lcore's counters, as it gets to them
  }
  EXPECT_EQ(job_counters(*s.engine, 0).leaves, 1u);
  EXPECT_EQ(job_counters(*s.engine, 0).addresses_kept, 2u);

  s.workers->ip_shift = 0;
  s.workers->send(job, 1, whole_chunk_request(l, proto::Opcode::rerequest, 0, 1), {}, "\x01");
  const auto got = s.workers->receive(segments);
  ASSERT_EQ(got.size(), segments) << "the rank still gets its results at home";
  for (const auto& r : got) EXPECT_EQ(r.dst_ip, kServerIp + 100 + 1);
}

// A stalled round is reported again every period; to an unproven contributor only as long as its push's
// bytes last.
TEST(Amplification, StallReportsToAnUnprovenAddressEndWithItsCredit) {
  StartedEngine s(1, {make_job(1, 2, {352})}, [](config::Config& c) { c.timeouts.round_stall_ms = 10; });
  push_segment(s, 0, 0, 0, 0, 0);  // rank 1 never pushes
  const size_t pushed = proto::kFrameHeadersBytes + 352 * sizeof(float);
  const auto got = s.workers->receive(1000, std::chrono::milliseconds(1500));
  ASSERT_GE(got.size(), 1u);
  for (const auto& r : got) EXPECT_EQ(r.hdr.status, proto::Status::round_stalled);
  EXPECT_LE(frame_bytes(got), pushed);
  EXPECT_GT(drops(*s.engine, Drop::unproven_limit), 0u) << "reports every 10 ms for 1.5 s outrun the credit";
}

// The engine runs hierarchical jobs, allreduce and ps (hubs_test.cpp), but refuses one it cannot
// authenticate forwards of.
TEST(Engine, RacksNeedASecret) {
  RingLink link(1);
  auto cfg = make_config(link.server_name(), 1, {make_job(1, 2, {4096})});
  cfg.racks.push_back(config::Rack{"rack-a", 0xc6120001, 0});
  cfg.rack = "rack-a";
  cfg.jobs[0].ranks_by_rack = {{"rack-a", {0, 1}}};
  auto e = engine::Engine::create(cfg);
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().find("secret: required when racks are set"), std::string::npos) << e.error();
}

// ports[].steering with two lcores on net_ring, whose PMD takes no rte_flow rules: "flow" refuses the start,
// naming the field and the port; "auto" falls back to the ring hand-off and says why; "ring" installs none.
TEST(Engine, SteeringFlowRefusesAPortWithoutRulesAutoFallsBackToRings) {
  // One link per engine: an engine that goes releases its port.
  auto start = [](config::Steering steering) -> std::pair<std::string, std::string> {
    RingLink link(2);
    auto cfg = make_config(link.server_name(), 2, {make_job(1, 2, {4096})});
    cfg.ports[0].steering = steering;
    auto e = engine::Engine::create(cfg);
    if (!e) return {e.error(), ""};
    for (const auto& l : (*e)->startup_lines()) {
      if (l.find("steering: ") != std::string::npos) return {"", l};
    }
    return {"", "no steering line"};
  };
  const auto [flow_error, flow_line] = start(config::Steering::flow);
  EXPECT_EQ(flow_error.rfind("ports[1].steering: \"flow\" needs rte_flow rules, and ", 0), 0u) << flow_error << flow_line;
  EXPECT_NE(flow_error.find(" refused them: "), std::string::npos) << flow_error;
  const auto [auto_error, auto_line] = start(config::Steering::automatic);
  EXPECT_EQ(auto_error, "");
  EXPECT_EQ(auto_line.rfind("port p0 steering: ring hand-off (", 0), 0u) << auto_line;
  const auto [ring_error, ring_line] = start(config::Steering::ring);
  EXPECT_EQ(ring_error, "");
  EXPECT_EQ(ring_line, "port p0 steering: ring hand-off (configured)");
}

// config::place_memory in the engine: every pool is created on the socket the placement gives it, each
// lcore's state is DPDK memory on its lcore's socket, and the start-up lines say where each pool went. This
// machine has one socket; the placement's own shapes (two and four sockets) are tests/unit/config's.
TEST(Engine, PoolsAndLcoreStateAreWhereThePlacementPutsThem) {
  RingLink link(2);
  auto cfg = make_config(link.server_name(), 2, {make_job(1, 2, {4096})});
  auto e = engine::Engine::create(cfg);
  ASSERT_TRUE(e) << e.error();
  const config::Placement& pl = (*e)->placement();
  std::vector<int> lcore_sockets;
  for (const auto& l : cfg.lcores) lcore_sockets.push_back(static_cast<int>(rte_lcore_to_socket_id(l.id)));
  EXPECT_EQ(pl.lcore_socket, lcore_sockets);
  const int port_socket = (*e)->ports()[0]->numa_socket();
  EXPECT_EQ(pl.rx_pool_socket[0], port_socket >= 0 ? port_socket : lcore_sockets[0]);
  const auto lines = (*e)->startup_lines();
  const std::string rx_line = "memory: port p0 rx pool on " + config::Placement::socket_name(pl.rx_pool_socket[0]);
  EXPECT_NE(std::find(lines.begin(), lines.end(), rx_line), lines.end()) << rx_line;
  size_t pools = 0;
  for (const auto& p : (*e)->report().pools) {
    const rte_mempool* mp = rte_mempool_lookup(p.name.c_str());
    ASSERT_NE(mp, nullptr) << p.name;
    const bool rx = p.name.find("_rx") != std::string::npos;
    EXPECT_EQ(mp->socket_id, rx ? pl.rx_pool_socket[0] : pl.tx_pool_sockets[0]) << p.name;
    ++pools;
  }
  EXPECT_GE(pools, 3u);  // rx, header and result-reference pools at least
  for (size_t i = 0; i < (*e)->lcores().size(); ++i) {
    const rte_memseg* seg = rte_mem_virt2memseg((*e)->lcores()[i].get(), nullptr);
    ASSERT_NE(seg, nullptr) << "lcore " << i << "'s state is not in DPDK memory";
    EXPECT_EQ(seg->socket_id, pl.lcore_socket[i]) << "lcore " << i;
    const rte_memseg* job = rte_mem_virt2memseg((*e)->snapshot().runtimes[0]->lcores[i].get(), nullptr);
    ASSERT_NE(job, nullptr) << "lcore " << i << "'s job state is not in DPDK memory";
    EXPECT_EQ(job->socket_id, pl.lcore_socket[i]) << "lcore " << i;
  }
}

TEST(Engine, ShardOwnsOnlyItsPartOfTheChunkMap) {
  auto job = make_job(1, 2, {8192 * 6});
  job.shard_count = 3;
  job.shard_index = 1;
  StartedEngine s(1, {job});
  Workers& w = *s.workers;
  // The client's view: 3 servers x 1 lcore = 3 owners; this server is owner 1 and listens on port_base + 0.
  proto::LayoutParams lp{{8192 * 6}, 8192, 3, 352};
  auto l = proto::Layout::build(lp);
  ASSERT_TRUE(l.has_value());
  size_t mine = 0, results = 0, errors = 0;
  for (uint32_t c = 0; c < l->chunk_count(); ++c) {
    for (uint16_t r = 0; r < 2; ++r) {
      proto::Header h;
      h.opcode = proto::Opcode::push;
      h.job_id = job.id;
      h.rank = r;
      h.chunk_id = c;
      h.elem_count = 352;
      std::vector<std::byte> frame(proto::kFrameHeadersBytes + 352 * 4);
      ASSERT_TRUE(proto::build_phub_frame(w.addrs(r, job.port_base), h, encode(std::vector<float>(352, 1.0f), Dtype::fp32),
                                          frame).has_value());
      w.send_frame(frame, 0);
    }
    mine += l->chunk(c).owner == 1;
  }
  for (const auto& r : w.receive(mine * 2 + (l->chunk_count() - mine) * 2)) {
    if (r.hdr.opcode == proto::Opcode::result) {
      ++results;
      EXPECT_EQ(l->chunk(r.hdr.chunk_id).owner, 1);
      EXPECT_EQ(decode(r.payload, Dtype::fp32)[0], 2.0f);
    } else {
      ++errors;
      EXPECT_EQ(r.hdr.status, proto::Status::bad_request);
      EXPECT_NE(l->chunk(r.hdr.chunk_id).owner, 1);
    }
  }
  EXPECT_EQ(mine, 2u);
  EXPECT_EQ(results, mine * 2);
  EXPECT_EQ(errors, (l->chunk_count() - mine) * 2);
}

}  // namespace
}  // namespace phub::test
