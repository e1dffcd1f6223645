// The resend timer of hub forwards in isolation (lib/engine's ResendTimer, RFC 6298 style).
#include "phub/engine/resend_timer.hpp"

#include <gtest/gtest.h>

namespace phub::engine {
namespace {

// Limits in plain units (say microseconds): 100 before a sample, 10 at least, 1000 at most.
constexpr ResendTimer::Limits kLimits{.initial = 100, .min = 10, .max = 1000};

TEST(ResendTimer, BeforeAnySampleTheRtoIsTheInitialOne) {
  ResendTimer t(kLimits);
  EXPECT_EQ(t.rto(), 100u);
  EXPECT_EQ(t.srtt(), 0u);
  EXPECT_EQ(ResendTimer({.initial = 5, .min = 10, .max = 1000}).rto(), 10u) << "clamped to min";
  EXPECT_EQ(ResendTimer({.initial = 5000, .min = 10, .max = 1000}).rto(), 1000u) << "clamped to max";
}

TEST(ResendTimer, TheFirstSampleSetsSrttAndHalfOfItAsVariance) {
  ResendTimer t(kLimits);
  t.sample(200);
  EXPECT_EQ(t.srtt(), 200u);
  EXPECT_EQ(t.rttvar(), 100u);
  EXPECT_EQ(t.rto(), 200u + 4 * 100u);
}

TEST(ResendTimer, LaterSamplesMoveSrttByAnEighthAndVarianceByAQuarter) {
  ResendTimer t(kLimits);
  t.sample(200);
  t.sample(280);  // err 80: rttvar (3*100 + 80)/4 = 95, srtt (7*200 + 280)/8 = 210
  EXPECT_EQ(t.rttvar(), 95u);
  EXPECT_EQ(t.srtt(), 210u);
  EXPECT_EQ(t.rto(), 210u + 4 * 95u);
}

TEST(ResendTimer, ASteadyRoundTripConvergesToItPlusTheLeastMargin) {
  // 4*RTTVAR has shrunk below the least margin: the RTO keeps a quarter of SRTT over it, so jitter of a
  // steady path is no loss.
  ResendTimer t(kLimits);
  for (int i = 0; i < 200; ++i) t.sample(300);
  EXPECT_EQ(t.srtt(), 300u);
  EXPECT_LE(t.rttvar(), 2u);
  EXPECT_EQ(t.rto(), 300u + 300u / 4);
  // A short round trip, whose quarter is below min: min over SRTT.
  ResendTimer fast(kLimits);
  for (int i = 0; i < 200; ++i) fast.sample(20);
  EXPECT_EQ(fast.srtt(), 20u);
  EXPECT_EQ(fast.rto(), 20u + 10u);
}

TEST(ResendTimer, TheRtoStaysWithinItsLimits) {
  ResendTimer fast(kLimits);
  for (int i = 0; i < 50; ++i) fast.sample(1);
  EXPECT_GE(fast.rto(), 10u);
  ResendTimer slow(kLimits);
  slow.sample(5000);
  EXPECT_EQ(slow.rto(), 1000u);
}

TEST(ResendTimer, ATimeoutDoublesTheWaitUpToMaxAndTheRtoWithIt) {
  ResendTimer t(kLimits);
  t.sample(50);  // rto 50 + 4*25 = 150
  ASSERT_EQ(t.rto(), 150u);
  EXPECT_EQ(t.timed_out(150, t.samples()), 300u);
  EXPECT_EQ(t.rto(), 300u);
  EXPECT_EQ(t.timed_out(300, t.samples()), 600u);
  EXPECT_EQ(t.timed_out(600, t.samples()), 1000u) << "capped";
  EXPECT_EQ(t.timed_out(1000, t.samples()), 1000u);
  EXPECT_EQ(t.rto(), 1000u);
}

TEST(ResendTimer, WaitsTimingOutTogetherDoubleTheRtoOnce) {
  ResendTimer t(kLimits);
  t.sample(50);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(t.timed_out(150, t.samples()), 300u);
  EXPECT_EQ(t.rto(), 300u);
}

TEST(ResendTimer, AFreshSampleEndsTheBackoff) {
  ResendTimer t(kLimits);
  t.sample(50);
  (void)t.timed_out(150, t.samples());
  (void)t.timed_out(300, t.samples());
  ASSERT_EQ(t.rto(), 600u);
  t.sample(50);  // srtt 50, rttvar (3*25 + 0)/4 = 18
  EXPECT_EQ(t.rto(), 50u + 4 * 18u);
}

TEST(ResendTimer, WithoutSamplesABackedOffRtoStays) {
  // Karn's rule gives no sample while every wait is resent: the timer must not fall back to a short RTO.
  ResendTimer t(kLimits);
  (void)t.timed_out(t.rto(), t.samples());
  EXPECT_EQ(t.rto(), 200u);
  (void)t.timed_out(100, t.samples());  // an older, shorter wait timing out later lowers nothing
  EXPECT_EQ(t.rto(), 200u);
}

TEST(ResendTimer, AWaitBegunBeforeAFreshSampleBacksOffAloneAndLeavesTheRto) {
  // A wait that began at a backed-off RTO times out after the peer answered other waits: its own next wait
  // doubles, the RTO that new waits start from stays the fresh estimate.
  ResendTimer t(kLimits);
  t.sample(50);
  (void)t.timed_out(150, t.samples());
  ASSERT_EQ(t.rto(), 300u);
  const uint64_t began = t.samples();  // a wait begins at RTO 300
  t.sample(50);                        // another wait is answered: srtt 50, rttvar 18
  ASSERT_EQ(t.rto(), 50u + 4 * 18u);
  EXPECT_EQ(t.timed_out(300, began), 600u) << "its own next wait doubles";
  EXPECT_EQ(t.rto(), 50u + 4 * 18u) << "new waits start from the fresh estimate";
  EXPECT_EQ(t.timed_out(t.rto(), t.samples()), 2 * (50u + 4 * 18u)) << "a wait begun after the sample backs off";
  EXPECT_EQ(t.rto(), 2 * (50u + 4 * 18u));
}

}  // namespace
}  // namespace phub::engine
