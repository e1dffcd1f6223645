// The token bucket of the job rate limits (packets accepted, bytes of answers sent).
#include <gtest/gtest.h>

#include "phub/engine/token_bucket.hpp"

namespace phub::engine {
namespace {

constexpr uint64_t kHz = 1'000'000'000;  // 1 tick = 1 ns

TEST(TokenBucket, ZeroRateIsUnlimited) {
  TokenBucket b;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(b.admit(1, kHz, 0, 1e9, 1));
}

TEST(TokenBucket, StartsFullAndPassesTheBurstThenTheRate) {
  TokenBucket b;
  // 1 MB/s: a burst of 10 ms is 10,000 bytes, under the minimum of 16,384.
  uint64_t passed = 0;
  for (int i = 0; i < 100; ++i) passed += b.admit(1, kHz, 1'000'000, 1000, 16384) ? 1000 : 0;
  EXPECT_EQ(passed, 16000u) << "the burst (16 of 1000 bytes fit in 16,384)";
  // One second later: the bucket refilled to its burst, not to a second's worth.
  passed = 0;
  for (int i = 0; i < 100; ++i) passed += b.admit(1 + kHz, kHz, 1'000'000, 1000, 16384) ? 1000 : 0;
  EXPECT_EQ(passed, 16000u);
  // Over a second of steady demand: the rate, give or take the burst.
  passed = 0;
  for (uint64_t t = 2 * kHz; t < 3 * kHz; t += 100'000) passed += b.admit(t, kHz, 1'000'000, 1000, 16384) ? 1000 : 0;
  EXPECT_GE(passed, 1'000'000u - 2000u);
  EXPECT_LE(passed, 1'000'000u + 17'000u);
}

TEST(TokenBucket, ACostOverTheBurstNeverPasses) {
  TokenBucket b;
  EXPECT_FALSE(b.admit(1, kHz, 1000, 50'000, 16384));
  EXPECT_FALSE(b.admit(10 * kHz, kHz, 1000, 50'000, 16384));
}

TEST(TokenBucket, ATimeGoingBackwardsAddsNothing) {
  TokenBucket b;
  EXPECT_TRUE(b.admit(kHz, kHz, 100, 32, 32));
  EXPECT_FALSE(b.admit(kHz / 2, kHz, 100, 1, 32)) << "earlier than the last use: no refill";
}

}  // namespace
}  // namespace phub::engine
