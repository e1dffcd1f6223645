// TxBuffer against a port that frees every packet it takes and hands the mbufs out again at once, as a
// PMD and another user of the pool may: what the buffer counts must come from before the hand-off.
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <vector>

#include "phub/drivers/mempool.hpp"
#include "phub/engine/tx_buffer.hpp"
#include "phub/proto/frame.hpp"

namespace phub::test {
namespace {

// Takes at most `budget` packets per call and frees them, after scribbling on them as a PMD may (and as the
// next user of the pool will: the memory is the pool's again).
struct ReusingPort {
  mutable uint16_t budget = 0;

  uint16_t tx(uint16_t /*queue*/, rte_mbuf** pkts, uint16_t n) const {
    const uint16_t k = n < budget ? n : budget;
    for (uint16_t i = 0; i < k; ++i) {
      pkts[i]->pkt_len = 0xdead;
      rte_pktmbuf_free(pkts[i]);
    }
    return k;
  }
};

TEST(TxBuffer, CountsWhatItHandedOverWithoutReadingItAfterwards) {
  auto pool = drivers::Mempool::create("txb_reuse", 1023, RTE_MBUF_DEFAULT_BUF_SIZE, 0, 0);
  ASSERT_TRUE(pool.has_value()) << pool.error();
  ReusingPort port;
  engine::BasicTxBuffer<ReusingPort> buf;
  buf.bind(&port, 0);
  engine::LcoreCounters c;
  uint64_t bytes = 0;
  port.budget = 7;  // the queue takes part of each burst: the rest waits for the next flush
  for (uint16_t i = 0; i < 100; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool->get());
    ASSERT_NE(m, nullptr);
    const uint16_t len = static_cast<uint16_t>(60 + 13 * i);
    ASSERT_NE(rte_pktmbuf_append(m, len), nullptr);
    bytes += len;
    ASSERT_TRUE(buf.add(m, c));
  }
  port.budget = 1000;
  buf.flush(c);
  EXPECT_EQ(buf.pending(), 0u);
  EXPECT_EQ(c.tx_packets, 100u);
  EXPECT_EQ(c.tx_bytes, bytes);
}

// A frame as the lcores build them: Ethernet/IPv4/UDP and a phub header of opcode `op`, no payload.
rte_mbuf* phub_frame(rte_mempool* pool, proto::Opcode op) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  auto* p = reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, proto::kFrameHeadersBytes));
  proto::Header h;
  h.opcode = op;
  proto::FlowAddrs a;
  a.src_ip = 0xc6120001;
  a.dst_ip = 0xc612000a;
  a.src_port = 42100;
  a.dst_port = 20000;
  if (p == nullptr || !proto::build_phub_frame(a, h, {}, std::span<std::byte>(p, proto::kFrameHeadersBytes))) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  return m;
}

TEST(TxBuffer, CountsTheMessagesItHandedOverByOpcode) {
  auto pool = drivers::Mempool::create("txb_opcodes", 255, RTE_MBUF_DEFAULT_BUF_SIZE, 0, 0);
  ASSERT_TRUE(pool.has_value()) << pool.error();
  ReusingPort port;
  engine::BasicTxBuffer<ReusingPort> buf;
  buf.bind(&port, 0);
  engine::LcoreCounters c;
  port.budget = 3;
  const proto::Opcode sent[] = {proto::Opcode::result, proto::Opcode::result, proto::Opcode::joined,
                                proto::Opcode::error,  proto::Opcode::fwd_init, proto::Opcode::result};
  for (proto::Opcode op : sent) {
    rte_mbuf* m = phub_frame(pool->get(), op);
    ASSERT_NE(m, nullptr);
    ASSERT_TRUE(buf.add(m, c));
  }
  rte_mbuf* other = rte_pktmbuf_alloc(pool->get());  // not a phub message (an ARP answer's length, zeros)
  ASSERT_NE(other, nullptr);
  ASSERT_NE(rte_pktmbuf_append(other, 60), nullptr);
  ASSERT_TRUE(buf.add(other, c));
  buf.flush(c);  // the port takes the first three: only those are counted
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::result)], 2u);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::joined)], 1u);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::error)], 0u);
  port.budget = 1000;
  buf.flush(c);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::result)], 3u);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::joined)], 1u);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::error)], 1u);
  EXPECT_EQ(c.tx_messages[static_cast<size_t>(proto::Opcode::fwd_init)], 1u);
  EXPECT_EQ(c.tx_messages[0], 1u);
  EXPECT_EQ(c.tx_packets, 7u);
  EXPECT_EQ(engine::message_slot_name(0), "other");
  EXPECT_EQ(engine::message_slot_name(static_cast<size_t>(proto::Opcode::hub_state)), "hub_state");
}

}  // namespace
}  // namespace phub::test
