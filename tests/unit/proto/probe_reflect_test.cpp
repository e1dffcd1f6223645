// The probe reflector: a probe_request frame turned in place into the probe_reply that goes back to its sender.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "phub/base/bytes.hpp"
#include "phub/proto/probe_reflect.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

const MacAddr kReflectorMac{0x02, 0xcc, 0, 0, 0, 9};

// A probe_request from sample_addrs() with a body of `body_bytes`, a CRC over it, and a UDP checksum.
std::vector<std::byte> probe_request_frame(size_t body_bytes) {
  Header h;
  h.opcode = Opcode::probe_request;
  h.flags = flag::crc;
  h.job_id = 5;
  h.seq = 77;
  h.aux = 0xfeedbeef;  // the prober's nonce
  const auto body = test::bytes_of(body_bytes, 3);
  std::vector<std::byte> frame(kFrameHeadersBytes + body_bytes);
  auto len = build_phub_frame(test::sample_addrs(), h, body, frame);
  EXPECT_TRUE(len);
  return frame;
}

// The same frame with an 802.1Q tag after the MAC addresses.
std::vector<std::byte> with_vlan_tag(const std::vector<std::byte>& frame, uint16_t tci) {
  std::vector<std::byte> out(frame.begin(), frame.begin() + 12);
  out.resize(16);
  store_be<uint16_t>(out.data() + 12, kEtherTypeVlan);
  store_be<uint16_t>(out.data() + 14, tci);
  out.insert(out.end(), frame.begin() + 12, frame.end());
  return out;
}

void expect_reply_to_request(const std::vector<std::byte>& frame, const PhubFrame& req, size_t body_bytes) {
  auto rep = parse_phub_frame(frame);  // verifies the recomputed IPv4 header checksum
  ASSERT_TRUE(rep) << parse_error_name(rep.error());
  EXPECT_EQ(rep->l2.dst, req.l2.src);
  EXPECT_EQ(rep->l2.src, kReflectorMac);
  EXPECT_EQ(rep->l2.vlan_tci, req.l2.vlan_tci);
  EXPECT_EQ(rep->ip.src, req.ip.dst);
  EXPECT_EQ(rep->ip.dst, req.ip.src);
  EXPECT_EQ(rep->ip.ttl, 64);
  EXPECT_EQ(rep->udp.src_port, req.udp.dst_port);
  EXPECT_EQ(rep->udp.dst_port, req.udp.src_port);
  EXPECT_EQ(load_be<uint16_t>(frame.data() + rep->ip.l4_offset + 6), 0);  // no UDP checksum
  EXPECT_EQ(rep->hdr.opcode, Opcode::probe_reply);
  EXPECT_EQ(rep->hdr.flags & flag::crc, 0);
  EXPECT_EQ(rep->hdr.crc32c, 0u);
  EXPECT_EQ(rep->hdr.seq, req.hdr.seq);
  EXPECT_EQ(rep->hdr.aux, req.hdr.aux);
  EXPECT_EQ(rep->hdr.job_id, req.hdr.job_id);
  const auto body = test::bytes_of(body_bytes, 3);
  ASSERT_EQ(rep->payload.size(), body.size());
  EXPECT_TRUE(std::equal(body.begin(), body.end(), rep->payload.begin()));
}

TEST(ProbeReflect, ReplyHeaderKeepsAllButOpcodeAndCrc) {
  Header req = test::sample_header();
  req.opcode = Opcode::probe_request;
  req.flags = flag::crc | flag::retransmit;
  req.crc32c = 0x12345678;
  const Header rep = probe_reply_header(req);
  EXPECT_EQ(rep.opcode, Opcode::probe_reply);
  EXPECT_EQ(rep.flags, flag::retransmit);
  EXPECT_EQ(rep.crc32c, 0u);
  Header expected = req;
  expected.opcode = rep.opcode;
  expected.flags = rep.flags;
  expected.crc32c = rep.crc32c;
  EXPECT_EQ(rep, expected);
}

TEST(ProbeReflect, TurnsARequestAroundInPlace) {
  for (size_t body_bytes : {0u, 24u, 1000u}) {
    auto frame = probe_request_frame(body_bytes);
    auto req = parse_phub_frame(frame);
    ASSERT_TRUE(req);
    const PhubFrame sent = *req;
    const Header written = reflect_probe_in_place(frame, sent, kReflectorMac);
    EXPECT_EQ(written, probe_reply_header(sent.hdr));
    expect_reply_to_request(frame, sent, body_bytes);
  }
}

TEST(ProbeReflect, KeepsAVlanTag) {
  auto frame = with_vlan_tag(probe_request_frame(64), 0x0123);
  auto req = parse_phub_frame(frame);
  ASSERT_TRUE(req);
  ASSERT_EQ(req->l2.vlan_tci, 0x0123);
  const PhubFrame sent = *req;
  reflect_probe_in_place(frame, sent, kReflectorMac);
  expect_reply_to_request(frame, sent, 64);
}

}  // namespace
}  // namespace phub::proto
