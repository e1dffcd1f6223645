// Push frames parse back to what was meant, each fault breaks a frame the way its counter says, pcap files
// round-trip in the classic microsecond format, and latency percentiles come out right.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

#include "phub/base/bytes.hpp"
#include "phub/gen/counters.hpp"
#include "phub/gen/faults.hpp"
#include "phub/gen/pcap.hpp"
#include "phub/gen/push_frame.hpp"
#include "phub/proto/errors.hpp"
#include "phub/proto/session_packet.hpp"

namespace phub::gen {
namespace {

JobSpec signed_job() {
  JobSpec s;
  s.id = 77;
  s.workers = 4;
  s.dtype = Dtype::bf16;
  s.key_elems = {2000};
  s.chunk_bytes = 8192;
  s.server_lcores = 2;
  s.port_base = 41000;
  s.secret = "tenant-secret";
  s.crc = true;
  s.round_modulus = 16;
  return s;
}

WorkerAddrs addrs() {
  WorkerAddrs a;
  a.src_mac = {2, 0, 0, 0, 0, 9};
  a.server_mac = {2, 0, 0, 0, 0, 1};
  a.server_ip = 0xc6120001;
  a.ip_base = 0xc6120064;
  return a;
}

TEST(GenFrames, ARankAddressIsEachRanksOwnNotOneBetweenPinnedRanks) {
  WorkerAddrs a = addrs();
  // Consecutive from ip_base: ranks 0..3 of 4, nothing below or above.
  EXPECT_TRUE(a.is_rank_ip(a.ip_base, 4));
  EXPECT_TRUE(a.is_rank_ip(a.ip_base + 3, 4));
  EXPECT_FALSE(a.is_rank_ip(a.ip_base + 4, 4));
  EXPECT_FALSE(a.is_rank_ip(a.ip_base - 1, 4));
  // Pinned ranks (a job's worker_ipv4) far apart: each one's address, none between them.
  a.rank_ips = {0xc6120010, 0xc6120050, 0xc6120030};
  for (uint16_t r = 0; r < 3; ++r) EXPECT_TRUE(a.is_rank_ip(a.rank_ips[r], 3)) << r;
  EXPECT_FALSE(a.is_rank_ip(0xc6120020, 3));
  EXPECT_FALSE(a.is_rank_ip(0xc6120040, 3));
  EXPECT_FALSE(a.is_rank_ip(a.rank_ips[2], 2)) << "rank 2 is not among the first two";
}

TEST(GenFrames, PushFrameParsesBackAndVerifies) {
  auto wl = Workload::build(signed_job(), 1500);
  ASSERT_TRUE(wl);
  SlotMap slots(*wl, {});
  const Slot& sl = slots[slots.size() - 1];  // the short last segment
  PushOrder o{3, slots.size() - 1, 21, false, true, false};
  std::vector<std::byte> buf(2048);
  const size_t len = write_push_frame(*wl, addrs(), sl, o, 1234, buf);
  ASSERT_GT(len, proto::kFrameHeadersBytes);
  auto f = proto::parse_phub_frame(std::span(buf.data(), len));
  ASSERT_TRUE(f) << proto::parse_error_name(f.error());
  EXPECT_EQ(f->hdr.opcode, proto::Opcode::push);
  EXPECT_EQ(f->hdr.job_id, 77u);
  EXPECT_EQ(f->hdr.rank, 3);
  EXPECT_EQ(f->hdr.round, 21u % 16);
  EXPECT_EQ(f->hdr.chunk_id, sl.chunk);
  EXPECT_EQ(f->hdr.elem_offset, sl.elem_offset);
  EXPECT_EQ(f->hdr.elem_count, sl.elems);
  EXPECT_EQ(f->hdr.flags, proto::flag::crc | proto::flag::retransmit);
  EXPECT_EQ(f->hdr.seq, 1234u);
  EXPECT_EQ(f->ip.src, 0xc6120064u + 3);
  EXPECT_EQ(f->udp.dst_port, 41000 + sl.owner);
  EXPECT_TRUE(proto::verify_header(wl->key(), std::span(buf.data() + 42, 54).first<54>()));
  const auto want = push_payload(*wl, sl, o);
  ASSERT_EQ(f->payload.size(), want.size());
  EXPECT_EQ(std::memcmp(f->payload.data(), want.data(), want.size()), 0);
}

// A session job's push: no job-key tag (the sender seals it), the epoch of the server lcore it goes to; sealed
// under a session's worker keys as phub-pktgen seals it (header, then the payload after it), it opens under the
// same session at the server, with its payload MAC, and a changed payload byte does not.
TEST(GenFrames, SessionPushCarriesItsLcoresEpochAndOpensOnceSealed) {
  JobSpec s = signed_job();
  s.secret = "a-secret-of-sixteen-bytes-or-more";
  s.sessions = true;
  s.crc = false;
  s.key_elems = {30000};  // chunks on both server lcores
  auto wl = Workload::build(s, 1500);
  ASSERT_TRUE(wl);
  EXPECT_FALSE(wl->signs_with_job_key());
  EXPECT_EQ(wl->epoch(1), 0);
  wl->set_epoch(1, 9);
  SlotMap slots(*wl, {});
  uint32_t i = 0;
  while (i < slots.size() && slots[i].owner != 1) ++i;
  ASSERT_LT(i, slots.size());
  std::vector<std::byte> buf(2048);
  const size_t len = write_push_frame(*wl, addrs(), slots[i], PushOrder{2, i, 5, false, false, false}, 1, buf);
  ASSERT_GT(len, proto::kFrameHeadersBytes);
  auto f = proto::parse_phub_frame(std::span(buf.data(), len));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->hdr.epoch, 9);
  EXPECT_EQ(f->hdr.auth_tag, 0u);
  proto::SessionContext ctx;
  ctx.rank = 2;
  ctx.incarnation = 0x1234;
  ctx.lcore_index = 1;
  ctx.worker_nonce = proto::draw_session_nonce();
  ctx.server_nonce = proto::draw_session_nonce();
  const proto::SessionKeys keys = proto::derive_session_keys(wl->key(), ctx);
  const proto::ReplyAddress reply{addrs().ip_of(2), 20002};
  const auto msg = std::span(buf.data() + 42, len - 42);
  proto::seal_session_header(proto::worker_to_server(keys), msg.first<proto::kHeaderBytes>(),
                             msg.subspan(proto::kHeaderBytes), reply, 1, true);
  proto::ReplayWindow fresh;
  EXPECT_EQ(proto::try_session_packet(proto::worker_to_server(keys), fresh, msg, reply, true), proto::SessionVerdict::ok);
  msg[proto::kHeaderBytes + 7] ^= std::byte{1};
  EXPECT_EQ(proto::try_session_packet(proto::worker_to_server(keys), fresh, msg, reply, true), proto::SessionVerdict::bad_mac);
}

// A recycled frame's headers, patched for another push of the same rank and payload pattern, must equal the
// headers written whole for that push: signed and CRC'd jobs, plain ones, rounds that wrap and rounds that do
// not, every server lcore (UDP port), and pushes of other chunks and segments.
TEST(GenFrames, PatchedHeadersEqualWrittenOnes) {
  for (int variant = 0; variant < 3; ++variant) {
    JobSpec s = signed_job();
    s.key_elems = {30000, 9000};
    if (variant == 1) {
      s.secret.clear();
      s.crc = false;
      s.round_modulus = 0;
    }
    if (variant == 2) {  // a session job whose two server lcores are in different epochs (its sender seals)
      s.sessions = true;
      s.crc = false;
    }
    auto wl = Workload::build(s, 1500);
    ASSERT_TRUE(wl);
    if (variant == 2) {
      wl->set_epoch(0, 3);
      wl->set_epoch(1, 7);
    }
    SlotMap slots(*wl, {});
    uint32_t checked = 0;
    uint32_t seed = 12345;
    auto next = [&seed] { return seed = seed * 1103515245u + 12345u; };
    for (int trial = 0; trial < 4000; ++trial) {
      const uint32_t a = next() % slots.size(), b = next() % slots.size();
      if (slots[a].elems != wl->segment_elems() || slots[b].elems != wl->segment_elems()) continue;
      const uint16_t rank = static_cast<uint16_t>(next() % s.workers);
      const PushOrder first{rank, a, next() % 1000, false, false, false};
      PushOrder second{rank, b, next() % 1000, false, false, false};
      // the same payload pattern: move the second push to a round where the patterns agree
      while (pattern_index(second.round, slots[b].chunk, slots[b].seg) !=
             pattern_index(first.round, slots[a].chunk, slots[a].seg)) {
        ++second.round;
      }
      std::array<std::byte, proto::kFrameHeadersBytes> patched{}, written{};
      write_push_headers(*wl, addrs(), slots[a], first, next(), patched);
      const uint32_t seq = next();
      patch_push_headers(*wl, slots[b], second, seq, patched);
      write_push_headers(*wl, addrs(), slots[b], second, seq, written);
      ASSERT_EQ(patched, written) << "variant " << variant << " slots " << a << "," << b << " rank " << rank;
      ++checked;
    }
    EXPECT_GT(checked, 1000u);
  }
}

TEST(GenFrames, EveryFrameFitsTheMtuIncludingPsInits) {
  for (Dtype d : {Dtype::fp32, Dtype::bf16}) {
    JobSpec s = signed_job();
    s.dtype = d;
    s.mode = Mode::ps;
    auto wl = Workload::build(s, 1500);
    ASSERT_TRUE(wl);
    SlotMap slots(*wl, {});
    std::vector<std::byte> buf(16384);
    for (bool init : {false, true}) {
      const size_t len = write_push_frame(*wl, addrs(), slots[0], PushOrder{0, 0, 0, init, false, false}, 1, buf);
      EXPECT_LE(len, 1500u + proto::kEthBytes) << dtype_name(d) << (init ? " init" : " push");
      auto f = proto::parse_phub_frame(std::span(buf.data(), len));
      ASSERT_TRUE(f);
      EXPECT_EQ(f->hdr.dtype, d);
    }
  }
}

TEST(GenFaults, EachFaultLandsInItsCounter) {
  auto wl = Workload::build(signed_job(), 1500);
  ASSERT_TRUE(wl);
  SlotMap slots(*wl, {});
  for (size_t i = 0; i < kFaultCount; ++i) {
    const auto fault = static_cast<Fault>(i);
    ASSERT_EQ(parse_fault(fault_name(fault)), fault);
    std::vector<std::byte> buf(2048);
    const size_t good = write_push_frame(*wl, addrs(), slots[0], PushOrder{1, 0, 2, false, false, false}, 1, buf);
    const size_t len = corrupt(fault, buf, good, FaultJob{4, 16, &wl->key()});
    auto f = proto::parse_phub_frame(std::span(buf.data(), len));
    const std::string counter(fault_server_counter(fault));
    if (counter.rfind("malformed_", 0) == 0) {
      ASSERT_FALSE(f) << fault_name(fault);
      EXPECT_EQ("malformed_" + std::string(proto::parse_error_name(f.error())), counter);
      continue;
    }
    ASSERT_TRUE(f) << fault_name(fault);
    const bool tag_ok = proto::verify_header(wl->key(), std::span(buf.data() + 42, 54).first<54>());
    switch (fault) {
      case Fault::bad_tag: EXPECT_FALSE(tag_ok); break;
      case Fault::foreign_rank: EXPECT_TRUE(tag_ok && f->hdr.rank >= 4); break;
      case Fault::unknown_job: EXPECT_NE(f->hdr.job_id, 77u); break;
      case Fault::wrong_opcode: EXPECT_TRUE(tag_ok && f->hdr.opcode == proto::Opcode::result); break;
      case Fault::future_round: EXPECT_TRUE(tag_ok && f->hdr.round == 4u); break;  // round 2 + 2 (modulus 16)
      default: ADD_FAILURE() << fault_name(fault) << " parsed as a valid frame";
    }
  }
  EXPECT_FALSE(parse_fault("nonsense"));
}

TEST(GenPcap, ClassicMicrosecondFileRoundTrips) {
  const std::string path = "/tmp/phub-gen-test-" + std::to_string(getpid()) + ".pcap";
  {
    auto w = PcapWriter::create(path);
    ASSERT_TRUE(w) << w.error();
    std::vector<std::byte> a(60, std::byte{1}), b(1514, std::byte{2});
    ASSERT_TRUE(w->write(a, 5));
    ASSERT_TRUE(w->write(b, 2'000'007));
    ASSERT_TRUE(w->close());
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  unsigned char head[24];
  ASSERT_EQ(std::fread(head, 1, 24, f), 24u);
  std::fclose(f);
  EXPECT_EQ(load_le<uint32_t>(reinterpret_cast<std::byte*>(head)), 0xa1b2c3d4u);
  EXPECT_EQ(load_le<uint32_t>(reinterpret_cast<std::byte*>(head) + 20), 1u);  // LINKTYPE_ETHERNET
  auto r = read_pcap(path);
  std::remove(path.c_str());
  ASSERT_TRUE(r) << r.error();
  ASSERT_EQ(r->frames.size(), 2u);
  EXPECT_EQ(r->frames[0].data.size(), 60u);
  EXPECT_EQ(r->frames[1].data.size(), 1514u);
  EXPECT_EQ(r->frames[1].ts_ns, 2'000'007'000u);
  EXPECT_EQ(r->frames[1].data[10], std::byte{2});
}

TEST(GenPcap, ParserRefusesTruncatedFilesAndReadsBothByteOrders) {
  std::vector<std::byte> file(24 + 16 + 4);
  auto put32 = [&](size_t off, uint32_t v, bool big) { big ? store_be<uint32_t>(file.data() + off, v)
                                                           : store_le<uint32_t>(file.data() + off, v); };
  for (bool big : {false, true}) {
    put32(0, kPcapMagicNs, big);
    put32(4, big ? 0x00020004 : 0x00040002, big);  // version 2.4 (two 16-bit fields)
    put32(20, kLinktypeEthernet, big);
    put32(24, 3, big);    // seconds
    put32(28, 500, big);  // nanoseconds
    put32(32, 4, big);    // captured bytes
    auto f = parse_pcap(file, "test");
    ASSERT_TRUE(f) << f.error();
    EXPECT_EQ(f->magic, kPcapMagicNs);
    ASSERT_EQ(f->frames.size(), 1u);
    EXPECT_EQ(f->frames[0].ts_ns, 3'000'000'500u);
    EXPECT_FALSE(parse_pcap(std::span(file).first(file.size() - 1), "test"));  // record cut short
  }
  file.resize(file.size() + 7);  // a partial record header after the last record
  EXPECT_FALSE(parse_pcap(file, "test"));
  EXPECT_FALSE(parse_pcap(std::span(file).first(23), "test"));
}

TEST(GenPcap, RefusesOtherLinkTypesAndFramesLongerThanTheSnapLength) {
  const std::string path = "/tmp/phub-gen-test-snap-" + std::to_string(getpid()) + ".pcap";
  {
    auto w = PcapWriter::create(path, 100);
    ASSERT_TRUE(w) << w.error();
    EXPECT_TRUE(w->write(std::vector<std::byte>(100, std::byte{3}), 1));
    EXPECT_FALSE(w->write(std::vector<std::byte>(101, std::byte{3}), 2));
    ASSERT_TRUE(w->close());
    EXPECT_EQ(w->frames(), 1u);
  }
  auto r = read_pcap(path);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->snaplen, 100u);
  ASSERT_EQ(r->frames.size(), 1u);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr);
  std::vector<std::byte> file(24 + 16 + 100);
  ASSERT_EQ(std::fread(file.data(), 1, file.size(), f), file.size());
  std::fclose(f);
  std::remove(path.c_str());
  store_le<uint32_t>(file.data() + 20, 105);  // LINKTYPE_IEEE802_11
  EXPECT_FALSE(parse_pcap(file, "test"));
  EXPECT_FALSE(read_pcap("/nonexistent/phub.pcap"));
}

TEST(GenCounters, PercentilesWithinTheBucketResolution) {
  Histogram h;
  for (uint64_t v = 1; v <= 10000; ++v) h.record(v * 1000);
  const auto s = h.snapshot();
  EXPECT_EQ(sample_count(s), 10000u);
  EXPECT_NEAR(static_cast<double>(percentile(s, 50)), 5e6, 5e6 * 0.07);
  EXPECT_NEAR(static_cast<double>(percentile(s, 99)), 9.9e6, 9.9e6 * 0.07);
  Histogram::Snapshot none{};
  EXPECT_EQ(percentile(none, 50), 0u);
  EXPECT_EQ(sample_count(minus(s, s)), 0u);
  for (uint64_t v : {0ull, 15ull, 16ull, 17ull, 1000ull, 123456789ull}) {
    const uint64_t back = Histogram::value(Histogram::bucket(v));
    EXPECT_NEAR(static_cast<double>(back), static_cast<double>(v), static_cast<double>(v) * 0.07 + 1) << v;
  }
}

}  // namespace
}  // namespace phub::gen
