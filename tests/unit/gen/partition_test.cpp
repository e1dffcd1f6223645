// The emulated workers' state machine against a scripted peer: the closed-loop window and retransmission
// backoff, lost, repeated, shuffled and wrong answers, the open-loop schedule, settling, ps initialisation.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <set>
#include <tuple>

#include "peer.hpp"

namespace phub::gen {
namespace {

using test::Rig;

JobSpec job(uint16_t workers, Dtype d = Dtype::fp32) {
  JobSpec s;
  s.workers = workers;
  s.dtype = d;
  s.key_elems = {3000, 1000, 10};
  s.chunk_bytes = 4096;  // 1024 elements per chunk, 3 segments of 352 fp32
  s.server_lcores = 2;
  return s;
}

Knobs rounds(uint64_t n) {
  Knobs k;
  k.max_rounds = n;
  return k;
}

TEST(GenSlots, OwnersSplitTheSegmentsExactlyOnce) {
  const Workload wl = Rig::build(job(2));
  const uint16_t o0[] = {0}, o1[] = {1};
  SlotMap a(wl, o0), b(wl, o1), all(wl, {});
  EXPECT_EQ(a.size() + b.size(), all.size());
  EXPECT_EQ(all.size(), wl.segments_total());
  EXPECT_EQ(all.elems(), 4010u);
  for (uint32_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].owner, 0);
    EXPECT_EQ(a.find(a[i].chunk, a[i].elem_offset), i);
    EXPECT_EQ(b.find(a[i].chunk, a[i].elem_offset), -1);
  }
  EXPECT_EQ(all.find(0, 351), -1);
}

TEST(GenPartition, ClosedLoopCompletesRoundsWithCorrectResults) {
  const uint16_t owners[] = {1};
  Rig r(job(4), owners);
  Knobs k = rounds(5);
  k.window = 4;
  ASSERT_TRUE(r.run_rounds(k, 10000));
  r.p.finish(r.now_ns);
  EXPECT_TRUE(r.p.settled());
  EXPECT_EQ(r.p.stats().rounds.get(), 4u * 5);
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  EXPECT_EQ(r.p.stats().results_ok.get(), 4u * 5 * r.p.slots().size());
  EXPECT_EQ(r.p.stats().retransmits.get(), 0u);
  EXPECT_EQ(r.p.next_round(), 5u);
  EXPECT_GT(sample_count(r.p.stats().round_ns.snapshot()), 0u);
}

TEST(GenPartition, ClosedLoopKeepsTheWindowAndBacksOffItsRetransmissions) {
  Rig r(job(3));  // 12 segments per worker round
  Knobs k;
  k.window = 4;
  k.rto_ns = 1'000'000;
  r.p.start(k, r.now_ns);
  const auto first = r.take();
  ASSERT_EQ(first.size(), 3u * 4);  // nobody answers: each worker stops at its window
  std::set<std::tuple<uint16_t, uint32_t, uint64_t>> sent;
  for (const auto& o : first) {
    EXPECT_FALSE(o.retransmit);
    sent.emplace(o.rank, o.slot, o.round);
  }
  r.now_ns += 900'000;
  EXPECT_TRUE(r.take().empty());  // within the RTO
  r.now_ns += 300'000;
  const auto again = r.take();
  ASSERT_EQ(again.size(), first.size());
  for (const auto& o : again) {
    EXPECT_TRUE(o.retransmit);
    EXPECT_EQ(sent.count({o.rank, o.slot, o.round}), 1u);
  }
  r.now_ns += 1'500'000;
  EXPECT_TRUE(r.take().empty());  // the RTO doubled to 2 ms
  r.now_ns += 700'000;
  EXPECT_EQ(r.take().size(), first.size());
  EXPECT_EQ(r.p.stats().retransmits.get(), 2 * first.size());
}

TEST(GenPartition, LostRepeatedAndShuffledAnswersStillCompleteCorrectly) {
  Rig r(job(8, Dtype::bf16));
  r.shuffle = true;
  r.lose_every = 7;
  Knobs k = rounds(6);
  k.loss = 0.2;
  k.dup = 0.1;
  k.reorder = true;
  k.rto_ns = 50'000;
  ASSERT_TRUE(r.run_rounds(k, 200000));
  const auto& st = r.p.stats();
  EXPECT_EQ(st.rounds.get(), 8u * 6);
  EXPECT_EQ(st.mismatches.get(), 0u);
  EXPECT_GT(st.dropped.get(), 0u);
  EXPECT_GT(st.retransmits.get(), 0u);
  EXPECT_GT(st.results_dup.get(), 0u);  // answers to duplicated and retransmitted pushes
  EXPECT_EQ(st.first_results.get(), 8u * 6 * r.p.slots().size());  // goodput counts each answer once
}

TEST(GenPartition, AWrongAnswerIsAMismatchWithItsPlace) {
  Rig r(job(2));
  r.p.start(rounds(1), r.now_ns);
  const auto orders = r.take();
  ASSERT_FALSE(orders.empty());
  for (size_t i = 0; i < orders.size(); ++i) {
    test::Answer a = r.peer.answer(orders[i]);
    if (i == 1) a.payload[8] ^= std::byte{0x40};  // element 2 of the second answer
    (void)r.p.on_result(a.rank, a.slot, a.wire_round, a.payload, r.now_ns);
  }
  EXPECT_EQ(r.p.stats().mismatches.get(), 1u);
  EXPECT_EQ(r.p.stats().results_ok.get(), orders.size() - 1);
  ASSERT_EQ(r.p.verifier().mismatches().size(), 1u);
  const auto& m = r.p.verifier().mismatches()[0];
  EXPECT_EQ(m.rank, orders[1].rank);
  EXPECT_EQ(m.elem, 2u);
  EXPECT_NE(m.describe(1).find("expected"), std::string::npos);
}

TEST(GenPartition, RoundBehindErrorsCountTheResultAsLost) {
  Rig r(job(2));
  r.p.start(rounds(1), r.now_ns);
  const auto orders = r.take();
  for (const auto& o : orders) {
    if (o.slot == 0) {
      r.p.on_error(o.rank, o.slot, r.wl.wire_round(o.round), proto::Status::round_behind, r.now_ns);
    } else {
      const test::Answer a = r.peer.answer(o);
      (void)r.p.on_result(a.rank, a.slot, a.wire_round, a.payload, r.now_ns);
    }
  }
  EXPECT_EQ(r.p.stats().results_lost.get(), 2u);
  EXPECT_EQ(r.p.stats().errors[static_cast<size_t>(proto::Status::round_behind)].get(), 2u);
  ASSERT_TRUE(r.run_until([&] { return r.p.rounds_done(); }, 1000));
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
}

TEST(GenPartition, StoppingMidRoundSettlesAndTheNextRunContinues) {
  Rig r(job(3));
  Knobs k;
  k.window = 2;
  r.p.start(k, r.now_ns);
  for (int i = 0; i < 7; ++i) r.step();  // somewhere inside round 0 or 1
  r.p.finish(r.now_ns);
  ASSERT_TRUE(r.run_until([&] { return r.p.settled(); }, 10000));
  const uint64_t next = r.p.next_round();
  EXPECT_GE(next, 1u);
  ASSERT_TRUE(r.run_rounds(rounds(2), 10000));
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  EXPECT_EQ(r.p.next_round(), next);  // still running: next_round moves when the run settles
  r.p.finish(r.now_ns);
  ASSERT_TRUE(r.run_until([&] { return r.p.settled(); }, 10000));
  EXPECT_EQ(r.p.next_round(), next + 2);
}

TEST(GenPartition, OpenLoopFollowsTheLockstepSchedule) {
  Rig r(job(3));
  Knobs k;
  k.mode = LoopMode::open;
  r.p.start(k, r.now_ns);
  std::vector<PushOrder> out(100);
  const size_t n = r.p.open_pushes(r.now_ns, out);
  ASSERT_EQ(n, out.size());
  for (size_t i = 0; i < n; ++i) {  // round, then segment, then rank
    const size_t per_round = 3 * r.p.slots().size();
    EXPECT_EQ(out[i].round, i / per_round);
    EXPECT_EQ(out[i].slot, (i % per_round) / 3);
    EXPECT_EQ(out[i].rank, i % 3);
  }
  r.p.drain();  // 100 is not a multiple of 3: the segment in progress is completed, then nothing
  EXPECT_EQ(r.p.open_pushes(r.now_ns, out), 2u);
  EXPECT_EQ(r.p.open_pushes(r.now_ns, out), 0u);
}

TEST(GenPartition, OpenLoopWithLossRepairsToTheLastRoundThenRunsClosed) {
  Rig r(job(4));
  Knobs k;
  k.mode = LoopMode::open;
  k.loss = 0.05;
  k.rto_ns = 100'000;
  r.p.start(k, r.now_ns);
  for (int i = 0; i < 40; ++i) r.step(16);
  r.p.drain();
  for (int i = 0; i < 3; ++i) r.step();
  EXPECT_LT(r.p.stats().first_results.get(), r.p.stats().originals.get());  // the loss shows
  r.p.finish(r.now_ns);
  ASSERT_TRUE(r.run_until([&] { return r.p.settled(); }, 100000));
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  ASSERT_TRUE(r.run_rounds(rounds(3)));
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  EXPECT_EQ(r.p.stats().rounds.get(), 4u * 3);
}

TEST(GenPartition, LosslessOpenLoopGetsEveryPushAnswered) {
  Rig r(job(5));
  Knobs k;
  k.mode = LoopMode::open;
  r.p.start(k, r.now_ns);
  for (int i = 0; i < 9; ++i) r.step(7);  // stops in the middle of a segment's ranks
  r.p.drain();
  for (int i = 0; i < 3; ++i) r.step(7);
  const auto& st = r.p.stats();
  EXPECT_GT(st.originals.get(), 0u);
  EXPECT_EQ(st.first_results.get(), st.originals.get());
  EXPECT_EQ(st.originals.get() % 5, 0u);  // whole segments only
  r.p.finish(r.now_ns);
  ASSERT_TRUE(r.run_until([&] { return r.p.settled(); }, 10000));
  EXPECT_EQ(st.mismatches.get(), 0u);
}

TEST(GenPartition, PsModeSendsRankZerosInitsBeforeAnyGradient) {
  JobSpec s = job(2, Dtype::bf16);
  s.mode = Mode::ps;
  s.mean = true;
  s.optimizer.kind = agg::OptimizerKind::adam;
  s.optimizer.lr = 0.05f;
  Rig r(s);
  Knobs k = rounds(3);
  k.window = 1000;
  r.p.start(k, r.now_ns);
  const auto inits = r.take();
  ASSERT_EQ(inits.size(), r.p.slots().size());
  for (const auto& o : inits) EXPECT_TRUE(o.init && o.rank == 0);
  EXPECT_TRUE(r.take().empty());  // no gradient before the weights are acknowledged
  for (const auto& o : inits) {
    const test::Answer a = r.peer.answer(o);
    (void)r.p.on_result(a.rank, a.slot, a.wire_round, a.payload, r.now_ns);
  }
  EXPECT_EQ(r.p.stats().results_ok.get(), inits.size());
  ASSERT_TRUE(r.run_until([&] { return r.p.rounds_done(); }, 1000));
  EXPECT_EQ(r.p.stats().inits.get(), r.p.slots().size());
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  EXPECT_EQ(r.p.stats().rounds.get(), 2u * 3);
}

TEST(GenPartition, LateCopiesOfResentInitAnswersAreNotRoundResults) {
  JobSpec s = job(2);
  s.mode = Mode::ps;
  Rig r(s);
  r.p.start(rounds(2), r.now_ns);
  const auto first = r.take();  // the inits; their answers are held back
  ASSERT_GT(first.size(), 0u);
  std::vector<test::Answer> held;
  for (const auto& o : first) held.push_back(r.peer.answer(o));
  r.now_ns += 60'000'000;  // past the init timeout: every init is sent again
  const auto again = r.take();
  EXPECT_EQ(again.size(), first.size());
  for (const auto& o : again) r.queued.push_back(r.peer.answer(o));
  ASSERT_TRUE(r.run_until([&] { return r.p.stats().rounds.get() > 0; }, 20000));
  for (auto& a : held) (void)r.p.on_result(a.rank, a.slot, a.wire_round, a.payload, r.now_ns);  // late copies
  ASSERT_TRUE(r.run_until([&] { return r.p.rounds_done(); }, 20000));
  EXPECT_EQ(r.p.stats().mismatches.get(), 0u);
  EXPECT_GE(r.p.stats().results_dup.get(), first.size());
}

TEST(GenVerifier, PsSgdMatchesAnIndependentUpdate) {
  JobSpec s = job(3);
  s.mode = Mode::ps;
  s.optimizer.kind = agg::OptimizerKind::sgd;
  s.optimizer.lr = 0.125f;
  const Workload wl = Rig::build(s);
  SlotMap slots(wl, {});
  Verifier v(wl, slots);
  const Slot& sl = slots[1];
  std::vector<float> w(sl.elems);
  std::memcpy(w.data(), wl.init_bytes(Workload::init_pattern(sl.chunk, sl.seg), sl.elems).data(), sl.elems * 4);
  for (uint64_t round = 0; round < 3; ++round) {
    const auto g = wl.sum(pattern_index(round, sl.chunk, sl.seg));
    for (uint32_t i = 0; i < sl.elems; ++i) w[i] = w[i] + g[i] * -0.125f;
    const auto want = v.expected_result(1, round);
    ASSERT_EQ(want.size(), sl.elems * 4u);
    EXPECT_EQ(std::memcmp(want.data(), w.data(), want.size()), 0) << "round " << round;
  }
  EXPECT_TRUE(v.expected_result(1, 0).empty());  // older than the two kept rounds
}

}  // namespace
}  // namespace phub::gen
