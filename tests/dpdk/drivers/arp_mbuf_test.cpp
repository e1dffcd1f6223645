// ARP in mbufs (phub/drivers/arp_mbuf.hpp): requests and replies padded to the Ethernet minimum, a received
// mbuf rewritten as the reply, and the ARP packet an mbuf holds.
#include <gtest/gtest.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include <cstring>
#include <vector>

#include "phub/drivers/arp_mbuf.hpp"
#include "phub/drivers/mempool.hpp"

namespace phub::drivers {
namespace {

const MacAddr kMyMac{0x02, 0xaa, 0, 0, 0, 1};
const MacAddr kPeerMac{0x02, 0xbb, 0, 0, 0, 2};
constexpr uint32_t kMyIp = 0xc6120001;    // 198.18.0.1
constexpr uint32_t kPeerIp = 0xc6120002;  // 198.18.0.2

class ArpMbuf : public ::testing::Test {
 protected:
  void SetUp() override {
    auto p = Mempool::create("test_arp_mbuf", 63, RTE_MBUF_DEFAULT_BUF_SIZE, static_cast<int>(rte_socket_id()), 0);
    ASSERT_TRUE(p) << p.error();
    pool_ = std::move(*p);
  }

  // The request the peer sends for kMyIp.
  proto::Arp peer_request() const {
    proto::Arp req;
    req.op = proto::ArpOp::request;
    req.sender_mac = kPeerMac;
    req.sender_ip = kPeerIp;
    req.target_ip = kMyIp;
    return req;
  }

  // `m` holds a 60-byte frame to `eth_dst`: an ARP packet with these fields, then zeros.
  static void expect_arp_frame(const rte_mbuf* m, const MacAddr& eth_dst, proto::ArpOp op, const MacAddr& sender_mac,
                               uint32_t sender_ip, uint32_t target_ip) {
    ASSERT_EQ(m->data_len, kMinEthFrameBytes);
    ASSERT_EQ(m->pkt_len, kMinEthFrameBytes);
    const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
    EXPECT_EQ(std::memcmp(p, eth_dst.data(), 6), 0);
    for (size_t i = proto::kArpFrameBytes; i < kMinEthFrameBytes; ++i) EXPECT_EQ(p[i], 0) << i;
    auto arp = arp_of(m);
    ASSERT_TRUE(arp);
    EXPECT_EQ(arp->op, op);
    EXPECT_EQ(arp->sender_mac, sender_mac);
    EXPECT_EQ(arp->sender_ip, sender_ip);
    EXPECT_EQ(arp->target_ip, target_ip);
    if (op == proto::ArpOp::reply) {
      EXPECT_EQ(arp->target_mac, eth_dst);
    }
  }

  Mempool pool_;
};

TEST_F(ArpMbuf, RequestIsABroadcastPaddedToTheMinimumFrame) {
  rte_mbuf* m = alloc_arp_request(pool_.get(), kMyMac, kMyIp, kPeerIp);
  ASSERT_NE(m, nullptr);
  expect_arp_frame(m, kBroadcastMac, proto::ArpOp::request, kMyMac, kMyIp, kPeerIp);
  rte_pktmbuf_free(m);
}

TEST_F(ArpMbuf, ReplyGoesToTheAsker) {
  rte_mbuf* m = alloc_arp_reply(pool_.get(), peer_request(), kMyMac, kMyIp);
  ASSERT_NE(m, nullptr);
  expect_arp_frame(m, kPeerMac, proto::ArpOp::reply, kMyMac, kMyIp, kPeerIp);
  rte_pktmbuf_free(m);
}

TEST_F(ArpMbuf, ReceivedRequestIsRewrittenAsTheReply) {
  rte_mbuf* m = alloc_arp_request(pool_.get(), kPeerMac, kPeerIp, kMyIp);
  ASSERT_NE(m, nullptr);
  ASSERT_NE(rte_pktmbuf_append(m, 100), nullptr);  // a longer frame than the reply, trailing bytes set
  std::memset(rte_pktmbuf_mtod_offset(m, uint8_t*, kMinEthFrameBytes), 0x5a, 100);
  auto req = arp_of(m);
  ASSERT_TRUE(req);
  ASSERT_TRUE(rewrite_as_arp_reply(m, *req, kMyMac, kMyIp));
  expect_arp_frame(m, kPeerMac, proto::ArpOp::reply, kMyMac, kMyIp, kPeerIp);
  rte_pktmbuf_free(m);
}

TEST_F(ArpMbuf, ChainedMbufIsLeftAlone) {
  rte_mbuf* head = alloc_arp_request(pool_.get(), kPeerMac, kPeerIp, kMyIp);
  rte_mbuf* tail = rte_pktmbuf_alloc(pool_.get());
  ASSERT_NE(head, nullptr);
  ASSERT_NE(tail, nullptr);
  ASSERT_NE(rte_pktmbuf_append(tail, 10), nullptr);
  ASSERT_EQ(rte_pktmbuf_chain(head, tail), 0);
  EXPECT_FALSE(rewrite_as_arp_reply(head, peer_request(), kMyMac, kMyIp));
  EXPECT_EQ(head->nb_segs, 2);
  EXPECT_EQ(head->pkt_len, kMinEthFrameBytes + 10u);
  EXPECT_EQ(arp_of(head)->op, proto::ArpOp::request);
  rte_pktmbuf_free(head);
}

TEST_F(ArpMbuf, NothingButArpIsArp) {
  rte_mbuf* m = alloc_arp_request(pool_.get(), kMyMac, kMyIp, kPeerIp);
  ASSERT_NE(m, nullptr);
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  p[12] = 0x08;  // EtherType IPv4
  p[13] = 0x00;
  EXPECT_FALSE(arp_of(m));
  p[13] = 0x06;
  p[proto::kEthBytes + 7] = 9;  // no such ARP op
  EXPECT_FALSE(arp_of(m));
  m->data_len = 20;  // cut short
  p[proto::kEthBytes + 7] = 1;
  EXPECT_FALSE(arp_of(m));
  rte_pktmbuf_free(m);
}

TEST_F(ArpMbuf, EmptyPoolGivesNoMbuf) {
  std::vector<rte_mbuf*> all;
  while (rte_mbuf* m = rte_pktmbuf_alloc(pool_.get())) all.push_back(m);
  EXPECT_EQ(alloc_arp_request(pool_.get(), kMyMac, kMyIp, kPeerIp), nullptr);
  EXPECT_EQ(alloc_arp_reply(pool_.get(), peer_request(), kMyMac, kMyIp), nullptr);
  for (rte_mbuf* m : all) rte_pktmbuf_free(m);
}

}  // namespace
}  // namespace phub::drivers
