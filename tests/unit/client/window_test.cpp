// The client's flow control pieces: the byte window (slow start, additive increase, cut on loss once per
// window of sends, undo of a needless cut), the retransmit timeout and its backoff schedule, result
// deduplication with stale-answer credits, and the fault dice.
#include <gtest/gtest.h>

#include "phub/client/backoff.hpp"
#include "phub/client/tracker.hpp"
#include "phub/client/transport.hpp"
#include "phub/client/window.hpp"

namespace phub::client {
namespace {

constexpr uint64_t kPacketBytes = 1400;
constexpr uint64_t kChunkBytes = 10 * kPacketBytes;

TEST(ClientWindow, AdmitsWhatFitsAndAlwaysOneChunk) {
  Window w(512 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);
  EXPECT_EQ(w.cwnd(), 64 * kPacketBytes);
  EXPECT_TRUE(w.may_send(1000 * kPacketBytes));  // nothing in flight: a chunk larger than the window still goes
  w.on_send(60 * kPacketBytes);
  EXPECT_TRUE(w.may_send(4 * kPacketBytes));
  EXPECT_FALSE(w.may_send(4 * kPacketBytes + 1));
  w.on_abandon(60 * kPacketBytes);
  EXPECT_EQ(w.in_flight(), 0u);
  Window small(10 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);  // a floor above the cap is lowered to it
  EXPECT_EQ(small.cwnd(), 10 * kPacketBytes);
}

TEST(ClientWindow, SlowStartThenOneChunkPerWindow) {
  Window w(100 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);
  w.set_step(kChunkBytes);
  w.on_send(64 * kPacketBytes);
  for (int i = 0; i < 30; ++i) w.on_result(kPacketBytes, 0, 0);
  EXPECT_EQ(w.cwnd(), 94 * kPacketBytes);  // slow start: the window grows by what was answered
  for (int i = 0; i < 10; ++i) w.on_result(kPacketBytes, 0, 0);
  EXPECT_EQ(w.cwnd(), 100 * kPacketBytes);  // capped
  w.on_loss(w.send_mark());
  EXPECT_EQ(w.cwnd(), 70 * kPacketBytes);  // cut to 70 %
  w.on_send(70 * kPacketBytes);
  for (int i = 0; i < 69; ++i) w.on_result(kPacketBytes, 0, 0);
  EXPECT_EQ(w.cwnd(), 70 * kPacketBytes);  // congestion avoidance: one step per window of results
  w.on_result(kPacketBytes, 0, 0);
  EXPECT_EQ(w.cwnd(), 70 * kPacketBytes + kChunkBytes);
}

TEST(ClientWindow, CutsOncePerWindowNotBelowTheFloorAndUndoes) {
  Window w(512 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);
  const uint64_t mark = w.send_mark();
  w.on_send(64 * kPacketBytes);
  w.on_loss(mark);
  const uint64_t cut = 64 * kPacketBytes * Window::kDecreasePercent / 100;
  EXPECT_EQ(w.cwnd(), cut);
  w.on_loss(mark);  // sent before the cut: the same loss episode
  EXPECT_EQ(w.cwnd(), cut);
  w.undo();  // the loss was reordering: back to the window before the cut
  EXPECT_EQ(w.cwnd(), 64 * kPacketBytes);
  for (int i = 0; i < 10; ++i) {
    const uint64_t m = w.send_mark();
    w.on_send(kPacketBytes);
    w.on_loss(m);
  }
  EXPECT_EQ(w.cwnd(), 2 * kChunkBytes);
  w.undo();  // undoes only the last cut
  EXPECT_LT(w.cwnd(), 64 * kPacketBytes);
}

// Answers one window of results, each `rtt_ns` after its send.
void answer_window(Window& w, uint64_t rtt_ns, uint64_t& now_ns) {
  const uint64_t n = w.cwnd() / kPacketBytes + 1;
  for (uint64_t i = 0; i < n; ++i) {
    now_ns += 1000;
    w.on_send(kPacketBytes);
    w.on_result(kPacketBytes, rtt_ns, now_ns);
  }
}

TEST(ClientWindow, DelayTargetStopsGrowthAndDrainsTheQueue) {
  Window w(512 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);
  w.set_step(kChunkBytes);
  w.set_delay_target(2'000'000);  // 2 ms of queue
  uint64_t now = 1;
  answer_window(w, 1'000'000, now);  // base round trip 1 ms, no queue: slow start goes on
  EXPECT_EQ(w.base_ns(), 1'000'000u);
  EXPECT_GT(w.cwnd(), 64 * kPacketBytes);
  w.on_result(0, 2'500'000, now);  // 1.5 ms of queue, above half the target: slow start ends
  const uint64_t grown = w.cwnd();
  answer_window(w, 2'500'000, now);  // below the target: one chunk more per window
  EXPECT_EQ(w.cwnd(), grown + kChunkBytes);
  for (int i = 0; i < 30; ++i) answer_window(w, 9'000'000, now);  // 8 ms of queue: shrink towards the target
  EXPECT_LT(w.cwnd(), grown);
  // At 9 ms per window the target (base + 2 ms = 3 ms) is a third of the window: it converges there or
  // stops at the floor.
  EXPECT_GE(w.cwnd(), 2 * kChunkBytes);
  answer_window(w, 1'000'000, now);  // the queue drained: growth resumes, one chunk per window
  const uint64_t low = w.cwnd();
  answer_window(w, 1'000'000, now);
  EXPECT_EQ(w.cwnd(), std::min<uint64_t>(low + kChunkBytes, 3 * low));
}

TEST(ClientWindow, BaseRoundTripForgetsAFasterPast) {
  Window w(512 * kPacketBytes, 2 * kChunkBytes, 64 * kPacketBytes);
  w.set_delay_target(1'000'000);
  w.on_result(0, 100'000, 1);
  w.on_result(0, 900'000, Window::kBasePeriodNs + 1);  // a new period: the old minimum still counts
  EXPECT_EQ(w.base_ns(), 100'000u);
  w.on_result(0, 800'000, 2 * Window::kBasePeriodNs + 2);  // two periods later it is forgotten
  EXPECT_EQ(w.base_ns(), 800'000u);
}

TEST(ClientRto, BackoffDoublesUpToTheCap) {
  Rto r(20000, 2000, 200000);
  EXPECT_EQ(r.rto_ns(), 20'000'000u);
  EXPECT_EQ(r.backoff_ns(0), 20'000'000u);
  EXPECT_EQ(r.backoff_ns(1), 40'000'000u);
  EXPECT_EQ(r.backoff_ns(3), 160'000'000u);
  EXPECT_EQ(r.backoff_ns(4), 200'000'000u);
  EXPECT_EQ(r.backoff_ns(40), 200'000'000u);
}

TEST(ClientRto, FollowsSamplesWithinItsBounds) {
  Rto r(20000, 2000, 200000);
  r.sample(1'000'000);  // 1 ms: srtt 1 ms, rttvar 0.5 ms -> 3 ms
  EXPECT_EQ(r.srtt_ns(), 1'000'000u);
  EXPECT_EQ(r.rto_ns(), 3'000'000u);
  for (int i = 0; i < 50; ++i) r.sample(100'000);
  EXPECT_EQ(r.rto_ns(), 2'000'000u);  // floor
  for (int i = 0; i < 50; ++i) r.sample(900'000'000);
  EXPECT_EQ(r.rto_ns(), 200'000'000u);  // cap
}

TEST(ClientTracker, DeduplicatesAndClears) {
  SegmentTracker t;
  t.resize(130);
  EXPECT_TRUE(t.mark(0));
  EXPECT_TRUE(t.mark(129));
  EXPECT_FALSE(t.mark(129));
  EXPECT_TRUE(t.has(0));
  EXPECT_FALSE(t.has(64));
  t.clear(100, 30);
  EXPECT_TRUE(t.has(0));
  EXPECT_FALSE(t.has(129));
  EXPECT_TRUE(t.mark(129));
}

TEST(ClientFaults, DiceHitTheirRate) {
  FaultDice d(42);
  int hits = 0;
  for (int i = 0; i < 100000; ++i) hits += d.roll(50000) ? 1 : 0;  // 5 %
  EXPECT_NEAR(hits, 5000, 400);
  EXPECT_FALSE(d.roll(0));
  EXPECT_TRUE(d.roll(1000000));
}

}  // namespace
}  // namespace phub::client
