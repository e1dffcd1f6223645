// Job epochs on the real engine: rank 0 of a new run restarts a job, old workers are dropped and answered,
// a new worker waits until the restart, replayed starts change nothing, ps weights survive a restart
// unless the new run asks for fresh ones, and ps pull/init answers are labelled as results.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "harness.hpp"

namespace phub::test {
namespace {

using engine::Drop;

constexpr uint32_t kElems = 352;  // one segment, one chunk

struct OneJob : StartedEngine {
  explicit OneJob(config::Job job) : StartedEngine(1, {std::move(job)}) {}

  const config::Job& job() const { return cfg.jobs[0]; }

  // Sends a join and returns the answer (joined, or an error).
  proto::Header join(uint16_t rank, uint32_t incarnation, uint16_t flags = 0, uint16_t epoch = 0) {
    proto::Header h;
    h.opcode = proto::Opcode::join;
    h.rank = rank;
    h.flags = flags;
    h.epoch = epoch;
    h.aux = incarnation;
    workers->send(job(), rank, h, {});
    auto got = workers->receive(1);
    if (got.size() != 1) throw std::runtime_error("no answer to join");
    return got[0].hdr;
  }
  // Joins as rank 0 of a new run the way the client does: start the epoch after the current one, guessing 1
  // first. Returns the epoch started.
  uint16_t restart(uint32_t incarnation, bool fresh = false) {
    const uint16_t flags = proto::flag::epoch_start | (fresh ? proto::flag::fresh_weights : 0);
    proto::Header a = join(0, incarnation, flags, 1);
    if (a.aux != incarnation) a = join(0, incarnation, flags, static_cast<uint16_t>(a.epoch + 1));
    EXPECT_EQ(a.opcode, proto::Opcode::joined);
    EXPECT_EQ(a.aux, incarnation);
    return a.epoch;
  }
  void push(uint16_t rank, uint32_t round, uint16_t epoch, float value) {
    proto::Header h;
    h.opcode = proto::Opcode::push;
    h.rank = rank;
    h.round = round;
    h.epoch = epoch;
    h.elem_count = kElems;
    workers->send(job(), rank, h, encode(std::vector<float>(kElems, value), Dtype::fp32));
  }
  proto::Header request(proto::Opcode op, uint16_t rank, uint32_t round, uint16_t epoch) {
    proto::Header h;
    h.opcode = op;
    h.rank = rank;
    h.round = round;
    h.epoch = epoch;
    h.elem_count = kElems;
    return h;
  }
  engine::JobCounters counters() const { return job_counters(*engine, 0); }
};

config::Job allreduce_job() {
  auto j = make_job(1, 2, {kElems});
  j.secret = "epoch-test-secret";
  return j;
}

// Pushes one round from both ranks and returns the results (two, one per rank).
std::vector<Received> full_round(OneJob& t, uint32_t round, uint16_t epoch, float a, float b) {
  t.push(0, round, epoch, a);
  t.push(1, round, epoch, b);
  return t.workers->receive(2);
}

TEST(Epoch, RankZeroOfANewRunRestartsTheJobAndOldWorkersAreDropped) {
  OneJob t(allreduce_job());
  // Run 1: its rank 0 moves the fresh job from epoch 0 to 1; ranks 0 and 1 complete two rounds, and
  // round 2 is half done.
  EXPECT_EQ(t.restart(1001), 1);
  const proto::Header r1 = t.join(1, 1002);
  EXPECT_EQ(r1.aux, 1002u);
  ASSERT_EQ(full_round(t, 0, 1, 1, 2).size(), 2u);
  ASSERT_EQ(full_round(t, 1, 1, 1, 2).size(), 2u);
  t.push(0, 2, 1, 5);
  EXPECT_EQ(t.counters().epochs_started, 1u);

  // Run 2: its rank 0 starts epoch 2; the round in progress and the round numbers are gone.
  const uint16_t e = t.restart(2001);
  EXPECT_EQ(e, 2);
  EXPECT_EQ(t.counters().epochs_started, 2u);

  // The old rank 1 finishing round 2 of epoch 1 is dropped, counted and told the job's epoch.
  t.push(1, 2, 1, 7);
  auto old = t.workers->receive(1);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].hdr.opcode, proto::Opcode::error);
  EXPECT_EQ(old[0].hdr.status, proto::Status::epoch_mismatch);
  EXPECT_EQ(old[0].hdr.aux, 2u);
  EXPECT_EQ(old[0].hdr.epoch, 1u) << "the error names the epoch of the packet it answers";
  EXPECT_EQ(drops(*t.engine, Drop::epoch_mismatch), 1u);

  // The new rank 1 joins epoch 1, and round 0 of epoch 1 sums the new run's pushes only.
  EXPECT_EQ(t.join(1, 2002).aux, 2002u);
  auto got = full_round(t, 0, e, 10, 20);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& r : got) {
    EXPECT_EQ(r.hdr.opcode, proto::Opcode::result);
    EXPECT_EQ(r.hdr.epoch, e);
    EXPECT_EQ(r.hdr.round, 0u);
    EXPECT_EQ(decode(r.payload, Dtype::fp32)[7], 30.0f);
  }
  EXPECT_EQ(t.counters().rounds_completed, 3u);
}

TEST(Epoch, ALeavingWorkerKeepsItsRankHeldUntilTheJobRestarts) {
  OneJob t(allreduce_job());
  EXPECT_EQ(t.restart(81), 1);
  const proto::Header in = t.join(1, 82);
  EXPECT_EQ(in.aux, 82u);
  EXPECT_EQ(in.elem_offset, 81u);     // the run: rank 0's incarnation
  EXPECT_EQ(t.join(1, 83).aux, 82u);  // held
  proto::Header leave;
  leave.opcode = proto::Opcode::leave;
  leave.rank = 1;
  leave.epoch = 1;
  leave.aux = 82;
  t.workers->send(t.job(), 1, leave, {});
  // The rank stays held: a process of another run must not join this run's rounds.
  EXPECT_EQ(t.join(1, 83).aux, 82u);
  EXPECT_EQ(t.counters().leaves, 1u);
  EXPECT_EQ(t.restart(91), 2);
  const proto::Header next = t.join(1, 83);
  EXPECT_EQ(next.aux, 83u);
  EXPECT_EQ(next.elem_offset, 91u);
}

TEST(Epoch, AWorkerOfTheNewRunWaitsUntilItsRankZeroRestarts) {
  OneJob t(allreduce_job());
  EXPECT_EQ(t.restart(11), 1);
  EXPECT_EQ(t.join(1, 12).aux, 12u);
  ASSERT_EQ(full_round(t, 0, 1, 1, 1).size(), 2u);
  // The new run's rank 1 comes first: the rank is held by the old process in epoch 1.
  const proto::Header early = t.join(1, 22);
  EXPECT_EQ(early.opcode, proto::Opcode::joined);
  EXPECT_EQ(early.epoch, 1);
  EXPECT_EQ(early.aux, 12u);
  // Its rank 0 restarts the job; now rank 1 gets in.
  EXPECT_EQ(t.restart(21), 2);
  const proto::Header in = t.join(1, 22);
  EXPECT_EQ(in.epoch, 2);
  EXPECT_EQ(in.aux, 22u);
  // A join that asks for a start from a rank other than 0 is refused.
  const proto::Header bad = t.join(1, 22, proto::flag::epoch_start, 3);
  EXPECT_EQ(bad.opcode, proto::Opcode::error);
  EXPECT_EQ(bad.status, proto::Status::bad_request);
  EXPECT_EQ(t.counters().epochs_started, 2u);
}

TEST(Epoch, AJoinWithIncarnationZeroOnlyAsksWhereTheJobStands) {
  OneJob t(allreduce_job());
  EXPECT_EQ(t.restart(11), 1);
  // The client asks so after its server restarted, before it claims a rank in an epoch it did not see start.
  const proto::Header asked = t.join(1, 0);
  EXPECT_EQ(asked.opcode, proto::Opcode::joined);
  EXPECT_EQ(asked.epoch, 1);
  EXPECT_EQ(asked.round, 0u);          // the epoch's first round
  EXPECT_EQ(asked.aux, 0u);            // rank 1 is free ...
  EXPECT_EQ(asked.elem_offset, 11u);   // ... in the run of rank 0's incarnation 11
  EXPECT_EQ(t.join(1, 12).aux, 12u);   // and still free after the question
  EXPECT_EQ(t.join(1, 0).aux, 12u);    // now the answer names its holder
}

TEST(Epoch, RepeatedOrReplayedStartsChangeNothing) {
  OneJob t(allreduce_job());
  EXPECT_EQ(t.restart(31), 1);
  EXPECT_EQ(t.restart(41), 2);
  ASSERT_EQ(t.join(1, 42).aux, 42u);
  ASSERT_EQ(full_round(t, 0, 2, 3, 4).size(), 2u);
  // The same start again (a retransmit): no restart, the round number stays.
  EXPECT_EQ(t.join(0, 41, proto::flag::epoch_start, 2).epoch, 2);
  // A replay of the earlier starts by another incarnation, and a start that skips an epoch.
  EXPECT_EQ(t.join(0, 31, proto::flag::epoch_start, 2).epoch, 2);
  EXPECT_EQ(t.join(0, 31, proto::flag::epoch_start, 1).epoch, 2);
  EXPECT_EQ(t.join(0, 31, proto::flag::epoch_start, 5).epoch, 2);
  EXPECT_EQ(t.counters().epochs_started, 2u);
  auto got = full_round(t, 1, 2, 3, 4);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].hdr.round, 1u);
  EXPECT_EQ(decode(got[0].payload, Dtype::fp32)[0], 7.0f);
}

config::Job ps_job() {
  auto j = make_job(2, 2, {kElems});
  j.mode = config::JobMode::ps;
  j.reduce = config::Reduce::sum;
  j.optimizer.kind = config::OptimizerKind::sgd;
  j.optimizer.lr = 0.5f;
  return j;
}

// Rank 0 initialises the weights to `w`; returns the acknowledgement.
Received init_weights(OneJob& t, uint16_t epoch, float w) {
  proto::Header h = t.request(proto::Opcode::init, 0, 0, epoch);
  t.workers->send(t.job(), 0, h, encode(std::vector<float>(kElems, w), Dtype::fp32));
  auto got = t.workers->receive(1);
  if (got.size() != 1) throw std::runtime_error("no init answer");
  return got[0];
}

Received pull(OneJob& t, uint16_t rank, uint32_t round, uint16_t epoch) {
  t.workers->send(t.job(), rank, t.request(proto::Opcode::pull, rank, round, epoch), {});
  auto got = t.workers->receive(1);
  if (got.size() != 1) throw std::runtime_error("no pull answer");
  return got[0];
}

TEST(Epoch, PsPullAndInitAnswersAreLabelledWithTheRoundTheyAreTheResultOf) {
  OneJob t(ps_job());
  const Received ack = init_weights(t, 0, 4);
  EXPECT_EQ(ack.hdr.opcode, proto::Opcode::result);
  EXPECT_EQ(ack.hdr.round, 0xffffffffu);  // the state before round 0
  ASSERT_EQ(full_round(t, 0, 0, 1, 1).size(), 2u);  // w = 4 - 0.5 * 2 = 3
  t.workers->prove(t.job(), 1);  // a pull is one header: only a proven address gets the weights
  const Received p = pull(t, 1, 1, 0);
  EXPECT_EQ(p.hdr.round, 0u);  // the weights after round 0, exactly what round 0's result was
  EXPECT_EQ(decode(p.payload, Dtype::fp32)[5], 3.0f);
  // A late repeated init (too late to set weights) is answered the same way, never as round 1's result.
  const Received late = init_weights(t, 0, 100);
  EXPECT_EQ(late.hdr.round, 0u);
  EXPECT_EQ(decode(late.payload, Dtype::fp32)[5], 3.0f);
}

TEST(Epoch, PsRestartKeepsTheWeightsUnlessTheNewRunAsksForFreshOnes) {
  OneJob t(ps_job());
  EXPECT_EQ(t.restart(51), 1);
  EXPECT_EQ(t.join(1, 52).aux, 52u);
  (void)init_weights(t, 1, 4);
  ASSERT_EQ(full_round(t, 0, 1, 1, 1).size(), 2u);  // w = 3
  t.push(0, 1, 1, 1);                               // a half-done round, dropped with the epoch

  EXPECT_EQ(t.restart(61), 2);
  EXPECT_EQ(t.join(1, 62).aux, 62u);
  Received kept = pull(t, 1, 0, 2);
  EXPECT_EQ(kept.hdr.round, 0xffffffffu);
  EXPECT_EQ(decode(kept.payload, Dtype::fp32)[0], 3.0f);
  // Rank 0's init comes too late: it is answered with the kept weights, which it takes.
  EXPECT_EQ(decode(init_weights(t, 2, 9).payload, Dtype::fp32)[0], 3.0f);
  auto got = full_round(t, 0, 2, 1, 1);  // w = 3 - 1 = 2
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].hdr.round, 0u);
  EXPECT_EQ(decode(got[0].payload, Dtype::fp32)[0], 2.0f);

  // Fresh weights: the job waits for rank 0's init again.
  EXPECT_EQ(t.restart(71, true), 3);
  EXPECT_EQ(t.join(1, 72).aux, 72u);
  t.push(1, 0, 3, 1);
  auto waiting = t.workers->receive(1);
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].hdr.status, proto::Status::not_initialized);
  EXPECT_EQ(decode(init_weights(t, 3, 8).payload, Dtype::fp32)[0], 8.0f);
  got = full_round(t, 0, 3, 2, 2);  // w = 8 - 0.5 * 4 = 6
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(decode(got[0].payload, Dtype::fp32)[0], 6.0f);
}

// A result buffer that a transmit still points at is never overwritten. The worker side reads nothing, so
// every result frame stays referenced in the link; with one chunk the job has its two result buffers and
// four spares, so the sixth round completes with every buffer busy: its advance waits, a push for the
// next round and a late one are dropped unanswered, and every frame read afterwards carries exactly its
// round's sum.
TEST(Deferral, AResultBufferStillBeingSentIsNeverOverwritten) {
  OneJob t(allreduce_job());
  for (uint16_t r = 0; r < 2; ++r) t.workers->prove(t.job(), r);  // the rerequest below is one header
  const auto wait_for = [&](const char* what, auto&& ready) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!ready()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "timed out waiting for " << what;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  };
  const auto value = [](uint32_t round, uint16_t rank) { return static_cast<float>(10 * (round + 1) + rank); };
  constexpr uint32_t kRounds = 6;
  for (uint32_t r = 0; r < kRounds; ++r) {
    t.push(0, r, 0, value(r, 0));
    t.push(1, r, 0, value(r, 1));
    wait_for("a round", [&] { return t.counters().rounds_completed == r + 1; });
  }
  EXPECT_EQ(t.counters().advances_deferred, 1u);
  t.push(0, kRounds, 0, value(kRounds, 0));  // the next round has not started: dropped, no answer
  wait_for("the drop", [&] { return t.counters().drops[static_cast<size_t>(Drop::advance_pending)] == 1; });
  // While deferred, a rerequest of the completed round is answered from its buffer, and a late push of the
  // round before it is dropped (every rank is past it), not answered with that older round's result.
  t.workers->send(t.job(), 1, t.request(proto::Opcode::rerequest, 1, kRounds - 1, 0), {});
  wait_for("the resend", [&] { return t.counters().results_resent == 1; });
  t.push(1, kRounds - 2, 0, value(kRounds - 2, 1));
  wait_for("the late push", [&] { return t.counters().drops[static_cast<size_t>(Drop::advance_pending)] == 2; });

  const auto got = t.workers->receive(2 * kRounds + 1);
  ASSERT_EQ(got.size(), 2 * kRounds + 1);
  for (const auto& g : got) {
    ASSERT_EQ(g.hdr.opcode, proto::Opcode::result);
    ASSERT_LT(g.hdr.round, kRounds);
    const float want = value(g.hdr.round, 0) + value(g.hdr.round, 1);
    for (float v : decode(g.payload, Dtype::fp32)) ASSERT_EQ(v, want) << "a result labelled round " << g.hdr.round;
  }
  // Read, the frames free their buffers: the round advances and the next one completes.
  t.push(0, kRounds, 0, value(kRounds, 0));
  t.push(1, kRounds, 0, value(kRounds, 1));
  const auto next = t.workers->receive(2);
  ASSERT_EQ(next.size(), 2u);
  for (const auto& g : next) {
    EXPECT_EQ(g.hdr.round, kRounds);
    EXPECT_EQ(decode(g.payload, Dtype::fp32)[0], value(kRounds, 0) + value(kRounds, 1));
  }
  EXPECT_EQ(t.counters().rounds_completed, kRounds + 1);
}

}  // namespace
}  // namespace phub::test
