// The client's flow control pieces: window growth and decrease, the retransmit timeout and its backoff
// schedule, result deduplication with stale-answer credits, and the fault dice.
#include <gtest/gtest.h>

#include "phub/client/backoff.hpp"
#include "phub/client/tracker.hpp"
#include "phub/client/transport.hpp"
#include "phub/client/window.hpp"

namespace phub::client {
namespace {

TEST(ClientWindow, AdmitsWhatFitsAndAlwaysOneChunk) {
  Window w(512, 8);
  EXPECT_EQ(w.cwnd(), Window::kInitial);
  EXPECT_TRUE(w.may_send(1000));  // nothing in flight: a chunk larger than the window still goes
  w.on_send(60);
  EXPECT_TRUE(w.may_send(4));
  EXPECT_FALSE(w.may_send(5));
  w.on_abandon(60);
  EXPECT_EQ(w.in_flight(), 0u);
}

TEST(ClientWindow, SlowStartThenAdditiveIncrease) {
  Window w(100, 8);
  w.on_send(64);
  for (int i = 0; i < 36; ++i) w.on_result();
  EXPECT_EQ(w.cwnd(), 100u);  // slow start: +1 per result, capped at the maximum
  w.on_timeout(0);
  EXPECT_EQ(w.cwnd(), 70u);  // cut to 70 %
  w.on_send(70);
  for (int i = 0; i < 69; ++i) w.on_result();
  EXPECT_EQ(w.cwnd(), 70u);  // congestion avoidance: one step per window of results
  w.on_result();
  EXPECT_EQ(w.cwnd(), 71u);
  w.set_chunk_packets(10);  // steps of one chunk, floor of two
  for (int i = 0; i < 71; ++i) w.on_result();
  EXPECT_EQ(w.cwnd(), 81u);
}

TEST(ClientWindow, CutsOncePerWindowAndNotBelowTheFloor) {
  Window w(512, 8);
  w.set_chunk_packets(12);  // floor 24
  const uint64_t mark = w.send_mark();
  w.on_send(64);
  w.on_timeout(mark);
  EXPECT_EQ(w.cwnd(), 44u);
  w.on_timeout(mark);  // sent before the cut: the same loss episode
  EXPECT_EQ(w.cwnd(), 44u);
  for (int i = 0; i < 5; ++i) {
    const uint64_t m = w.send_mark();
    w.on_send(1);
    w.on_timeout(m);
  }
  EXPECT_EQ(w.cwnd(), 24u);
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

TEST(ClientTracker, StaleCreditsAreCountedPerSegment) {
  SegmentTracker t;
  t.resize(4);
  t.add_stale(2);
  t.add_stale(2);
  EXPECT_FALSE(t.take_stale(1));
  EXPECT_TRUE(t.take_stale(2));
  EXPECT_TRUE(t.take_stale(2));
  EXPECT_FALSE(t.take_stale(2));
  for (int i = 0; i < 300; ++i) t.add_stale(3);  // saturates instead of wrapping
  t.clear_stale(0, 4);
  EXPECT_FALSE(t.take_stale(3));
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
