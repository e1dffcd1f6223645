// TxBuffer against a port that frees every packet it takes and hands the mbufs out again at once, as a
// PMD and another user of the pool may: what the buffer counts must come from before the hand-off.
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <vector>

#include "phub/drivers/mempool.hpp"
#include "phub/engine/tx_buffer.hpp"

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

}  // namespace
}  // namespace phub::test
