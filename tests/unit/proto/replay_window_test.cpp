// Tests of the anti-replay window (replay_window.hpp): verdicts, movement, extended sequence number
// inference, and a property test against a plain set model.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "phub/proto/replay_window.hpp"

namespace phub::proto {
namespace {

constexpr uint64_t kSpan = ReplayWindow::kSpan;

TEST(ReplayWindow, InOrderNumbersAreFreshOnce) {
  ReplayWindow w;
  for (uint64_t s = 0; s < 5000; ++s) {
    ASSERT_EQ(w.check(s), Replay::fresh) << s;
    ASSERT_EQ(w.commit(s), Replay::fresh) << s;
    ASSERT_EQ(w.check(s), Replay::replayed) << s;
    ASSERT_EQ(w.top(), s);
  }
}

TEST(ReplayWindow, ReorderingWithinTheWindowIsAccepted) {
  ReplayWindow w;
  ASSERT_EQ(w.commit(10000), Replay::fresh);
  // Everything in the span behind the top, in descending order, then again: fresh once, then replayed.
  for (uint64_t s = 9999; s > 10000 - kSpan; --s) ASSERT_EQ(w.commit(s), Replay::fresh) << s;
  for (uint64_t s = 10000; s > 10000 - kSpan; --s) ASSERT_EQ(w.commit(s), Replay::replayed) << s;
  EXPECT_EQ(w.top(), 10000u);
}

TEST(ReplayWindow, DuplicatesAreReplayedAndLeaveTheWindowAsItWas) {
  ReplayWindow w;
  for (uint64_t s : {5u, 3u, 9u, 4u}) ASSERT_EQ(w.commit(s), Replay::fresh);
  for (uint64_t s : {5u, 3u, 9u, 4u}) EXPECT_EQ(w.commit(s), Replay::replayed) << s;
  EXPECT_EQ(w.top(), 9u);
  for (uint64_t s : {0u, 1u, 2u, 6u, 7u, 8u, 10u}) EXPECT_EQ(w.check(s), Replay::fresh) << s;
}

TEST(ReplayWindow, NumbersBehindTheSpanAreTooOld) {
  ReplayWindow w;
  const uint64_t top = 1'000'000;
  ASSERT_EQ(w.commit(top), Replay::fresh);
  EXPECT_EQ(w.check(top - kSpan + 1), Replay::fresh);  // the window's bottom
  EXPECT_EQ(w.check(top - kSpan), Replay::too_old);
  EXPECT_EQ(w.commit(top - kSpan), Replay::too_old);
  EXPECT_EQ(w.check(0), Replay::too_old);
  EXPECT_EQ(w.top(), top);
  // Seen and then left behind: too old, not replayed.
  ASSERT_EQ(w.commit(top + kSpan), Replay::fresh);
  EXPECT_EQ(w.check(top), Replay::too_old);
  EXPECT_EQ(w.check(top + 1), Replay::fresh);
}

TEST(ReplayWindow, BigJumpsForwardForgetOnlyWhatLeftTheWindow) {
  ReplayWindow w;
  for (uint64_t s = 100; s < 200; ++s) ASSERT_EQ(w.commit(s), Replay::fresh);
  // A jump of less than the span: 100..199 stay seen where still inside.
  ASSERT_EQ(w.commit(1500), Replay::fresh);
  for (uint64_t s = 100; s < 200; ++s) EXPECT_EQ(w.check(s), Replay::replayed) << s;
  EXPECT_EQ(w.check(1499), Replay::fresh);
  // A jump to where the bitmap's every word is taken over: nothing old is seen, nothing new is stale.
  const uint64_t far = 1500 + 10 * ReplayWindow::kBits + 17;
  ASSERT_EQ(w.commit(far), Replay::fresh);
  for (uint64_t s = far - kSpan + 1; s < far; ++s) ASSERT_EQ(w.check(s), Replay::fresh) << s;
  EXPECT_EQ(w.check(1500), Replay::too_old);
  // A jump of exactly the bitmap (same word slot, next lap): the slot's old bits are cleared.
  ReplayWindow v;
  ASSERT_EQ(v.commit(64), Replay::fresh);
  ASSERT_EQ(v.commit(65), Replay::fresh);
  ASSERT_EQ(v.commit(64 + ReplayWindow::kBits), Replay::fresh);
  EXPECT_EQ(v.check(65 + ReplayWindow::kBits), Replay::fresh);
}

TEST(ReplayWindow, CheckAloneNeverMovesTheWindow) {
  // Forged packets are checked, fail their tag, and are never committed: whatever they carry, the window
  // and its verdicts stay as they were.
  ReplayWindow w;
  for (uint64_t s = 0; s < 50; ++s) ASSERT_EQ(w.commit(s), Replay::fresh);
  const ReplayWindow before = w;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) (void)w.check(rng());
  (void)w.check(UINT64_MAX);
  EXPECT_EQ(w.top(), before.top());
  for (uint64_t s = 0; s < 60; ++s) EXPECT_EQ(w.check(s), before.check(s)) << s;
  EXPECT_EQ(w.commit(50), Replay::fresh);
}

TEST(ReplayWindow, ZeroIsAnOrdinaryFirstNumber) {
  ReplayWindow w;
  EXPECT_EQ(w.check(0), Replay::fresh);
  EXPECT_EQ(w.commit(0), Replay::fresh);
  EXPECT_EQ(w.commit(0), Replay::replayed);
  EXPECT_EQ(w.top(), 0u);
}

TEST(ReplayWindow, InferenceAtTheStartTakesEveryLowHalfAsIs) {
  ReplayWindow w;
  for (uint32_t low : {0u, 1u, 1983u, 0x7fffffffu, 0xfffff000u, 0xffffffffu}) EXPECT_EQ(w.infer(low), low) << low;
}

TEST(ReplayWindow, InferenceFollowsTheWindowAcrossTheWrapOfTheLowHalf) {
  ReplayWindow w;
  // Top just below a wrap of the low half: numbers behind stay in block 0, small low halves are block 1.
  const uint64_t top = 0xffffff00ull;
  ASSERT_EQ(w.commit(top), Replay::fresh);
  EXPECT_EQ(w.infer(0xfffffe00u), 0xfffffe00ull);
  EXPECT_EQ(w.infer(static_cast<uint32_t>(top - kSpan + 1)), top - kSpan + 1);
  EXPECT_EQ(w.infer(0x00000005u), 0x100000005ull);
  // Below the window's bottom in the low space: ahead, in the next block (too old otherwise anyway).
  EXPECT_EQ(w.infer(static_cast<uint32_t>(top - kSpan)), (1ull << 32) + (top - kSpan));
  // Top just past the wrap: the window straddles it; low halves near 2^32 belong to the block before.
  ASSERT_EQ(w.commit(0x100000010ull), Replay::fresh);
  EXPECT_EQ(w.infer(0xfffffff0u), 0xfffffff0ull);
  EXPECT_EQ(w.infer(0x00000011u), 0x100000011ull);
  EXPECT_EQ(w.infer(0x00000005u), 0x100000005ull);
  EXPECT_EQ(w.infer(0x80000000u), 0x180000000ull);  // far ahead, below the straddling bottom's low half
  const auto bottom = 0x100000010ull - kSpan + 1;
  EXPECT_EQ(w.infer(static_cast<uint32_t>(bottom)), bottom);
  EXPECT_EQ(w.infer(static_cast<uint32_t>(bottom - 1)), bottom - 1 + (1ull << 32));
  EXPECT_EQ(w.check(w.infer(0xfffffff0u)), Replay::fresh);
}

// The model: every number seen, and the highest. Too old first, then seen, then fresh.
struct SetModel {
  std::set<uint64_t> seen;
  uint64_t top = 0;
  Replay verdict(uint64_t s) const {
    if (s <= top && top - s >= kSpan) return Replay::too_old;
    return seen.count(s) != 0 ? Replay::replayed : Replay::fresh;
  }
  void commit(uint64_t s) {
    if (verdict(s) != Replay::fresh) return;
    seen.insert(s);
    if (s > top) top = s;
  }
};

TEST(ReplayWindow, MatchesASetModelOnRandomSequencesThroughTheirLowHalves) {
  // A sender counts up from a start near a wrap of the low half (or 0); the network delivers each number
  // reordered by up to twice the span, duplicates some, replays some old, and forges some that are checked
  // but never committed. The receiver sees only the low 32 bits: it infers the rest, which must be the sent
  // number whenever that lies in the 2^32 numbers from the window's bottom on.
  std::array<size_t, 3> verdicts{};
  size_t misread = 0;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t start = seed % 3 == 0 ? 0 : (seed << 32) - rng() % 5000;
    ReplayWindow w;
    SetModel m;
    if (start != 0) {  // the window must know the high half first: the session's first number
      ASSERT_EQ(w.commit(start), Replay::fresh);
      m.commit(start);
    }
    uint64_t next = start + 1;
    std::vector<uint64_t> sent;
    for (int step = 0; step < 40000; ++step) {
      uint64_t s;
      const uint64_t pick = rng() % 100;
      if (pick < 70 || sent.empty()) {
        s = next + rng() % (2 * kSpan);  // reordered: a later number first
        next += rng() % 3 == 0 ? 1 + rng() % 4 : 1;
        if (rng() % 500 == 0) next += rng() % 100000;  // a burst of loss
      } else if (pick < 85) {
        s = sent[rng() % sent.size()];  // a duplicate or an old replay
      } else {
        s = next + rng() % (4 * kSpan);  // a forgery: checked, its tag fails, never committed
        const uint32_t low = static_cast<uint32_t>(s);
        ASSERT_EQ(w.check(w.infer(low)), m.verdict(w.infer(low))) << "seed " << seed << " forged " << s;
        continue;
      }
      const uint64_t inferred = w.infer(static_cast<uint32_t>(s));
      const uint64_t bottom = w.top() >= kSpan - 1 ? w.top() - (kSpan - 1) : 0;
      if (s >= bottom && s - bottom < (1ull << 32)) {
        ASSERT_EQ(inferred, s) << "seed " << seed << " top " << w.top();
      }
      const Replay expected = m.verdict(s);
      ASSERT_EQ(w.check(s), expected) << "seed " << seed << " seq " << s;
      ++verdicts[static_cast<size_t>(expected)];
      // The tag check binds the high half: a misread number is refused there, so only the real one counts.
      if (inferred != s) {
        ++misread;
        continue;
      }
      ASSERT_EQ(w.commit(s), expected) << "seed " << seed << " seq " << s;
      m.commit(s);
      ASSERT_EQ(w.top(), m.top);
      if (expected == Replay::fresh) sent.push_back(s);
    }
  }
  // Every verdict, and misread old numbers, came up many times.
  for (size_t v = 0; v < verdicts.size(); ++v) EXPECT_GT(verdicts[v], 1000u) << replay_name(static_cast<Replay>(v));
  EXPECT_GT(misread, 1000u);
}

TEST(Replay, NamesAreDistinct) {
  EXPECT_EQ(replay_name(Replay::fresh), "fresh");
  EXPECT_EQ(replay_name(Replay::replayed), "replayed");
  EXPECT_EQ(replay_name(Replay::too_old), "too_old");
}

}  // namespace
}  // namespace phub::proto
