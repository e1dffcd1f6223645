// Live change of the real engine (Engine::apply, drain, reset) while its lcores run: unchanged jobs keep
// their rounds and counters, added jobs work at once, removed jobs drain and disappear, what needs a
// restart changes nothing, and a rotated secret is accepted in its overlap window.
#include <gtest/gtest.h>

#include <thread>

#include "harness.hpp"

namespace phub::test {
namespace {

using engine::Drop;

constexpr uint32_t kElems = 352;  // one segment, one chunk

struct Live : StartedEngine {
  explicit Live(std::vector<config::Job> jobs)
      : StartedEngine(1, std::move(jobs), [](config::Config& c) {
          c.timeouts.drain_ms = 300;
          c.timeouts.round_stall_ms = 60000;  // no stall reports in the middle of these checks
        }) {}

  // Applies `next` and makes the workers know its jobs.
  engine::ReloadOutcome apply(const config::Config& next, const std::function<void()>& waiting = {}) {
    auto r = engine->apply(next, waiting);
    if (!r) throw std::runtime_error(r.error().front());
    cfg = next;
    for (const auto& j : cfg.jobs) (void)workers->layout(j, 1);
    return *r;
  }
  const config::Job& job(uint32_t id) const {
    for (const auto& j : cfg.jobs) {
      if (j.id == id) return j;
    }
    throw std::runtime_error("no job");
  }
  void push(const config::Job& j, uint16_t rank, uint32_t round, float v, const std::string& secret = "\x01") {
    proto::Header h;
    h.opcode = proto::Opcode::push;
    h.rank = rank;
    h.round = round;
    h.elem_count = kElems;
    workers->send(j, rank, h, encode(std::vector<float>(kElems, v), Dtype::fp32), secret);
  }
  // Both ranks push round `round` of job `id`; returns rank 0's result value (NaN if none came).
  float round_trip(uint32_t id, uint32_t round, float a, float b) {
    const auto& j = job(id);
    push(j, 0, round, a);
    push(j, 1, round, b);
    auto got = workers->receive(2);
    if (got.size() != 2 || got[0].hdr.opcode != proto::Opcode::result) return std::numeric_limits<float>::quiet_NaN();
    return decode(got[0].payload, Dtype::fp32)[0];
  }
  engine::JobCounters counters(uint32_t id) const {
    const int j = engine->snapshot().job_by_id(id);
    return job_counters(*engine, static_cast<size_t>(j));
  }
};

config::Job two_rank(uint32_t id, const std::string& secret = "") {
  auto j = make_job(id, 2, {kElems});
  j.secret = secret;
  return j;
}

TEST(Reload, UnchangedJobsKeepTheirRoundsAndAnAddedJobWorksAtOnce) {
  Live l({two_rank(1), two_rank(2)});
  EXPECT_EQ(l.round_trip(1, 0, 1, 2), 3.0f);
  EXPECT_EQ(l.round_trip(1, 1, 1, 2), 3.0f);
  const auto generation = l.engine->snapshot().generation;

  auto next = l.cfg;
  next.jobs[1].rate_limit_pps = 1'000'000;  // job 2 changes in place
  next.jobs.push_back(two_rank(3));         // job 3 is new
  const auto out = l.apply(next);
  EXPECT_EQ(out.diff.added, std::vector<uint32_t>{3});
  EXPECT_EQ(out.diff.changed, std::vector<uint32_t>{2});
  EXPECT_EQ(out.diff.unchanged, std::vector<uint32_t>{1});
  EXPECT_NE(l.engine->snapshot().generation, generation);

  // Job 1 goes on with round 2 (its state and counters were kept); job 3 starts at round 0.
  EXPECT_EQ(l.round_trip(1, 2, 5, 5), 10.0f);
  EXPECT_EQ(l.counters(1).rounds_completed, 3u);
  EXPECT_EQ(l.round_trip(3, 0, 4, 4), 8.0f);
  EXPECT_EQ(l.round_trip(2, 0, 1, 1), 2.0f);
  EXPECT_EQ(drops(*l.engine, Drop::unknown_port), 0u);
}

TEST(Reload, ARemovedJobDrainsItsRoundThenItsPortsAreClosed) {
  Live l({two_rank(1), two_rank(2)});
  EXPECT_EQ(l.round_trip(2, 0, 1, 1), 2.0f);
  const config::Job gone = l.job(2);
  l.push(gone, 0, 1, 1);  // a round in progress that will never complete: the drain times out
  auto next = l.cfg;
  next.jobs.pop_back();
  // The control thread's other duties (systemd's watchdog) go on while it waits: it is called back all along.
  std::vector<std::chrono::steady_clock::time_point> calls;
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = l.apply(next, [&] { calls.push_back(std::chrono::steady_clock::now()); });
  EXPECT_EQ(out.diff.removed, std::vector<uint32_t>{2});
  EXPECT_TRUE(out.drain_timed_out);
  EXPECT_GE(out.drain_ns, 300'000'000u);
  ASSERT_GE(calls.size(), 10u);
  auto longest = calls.front() - t0;
  for (size_t i = 1; i < calls.size(); ++i) longest = std::max(longest, calls[i] - calls[i - 1]);
  EXPECT_LT(longest, std::chrono::milliseconds(100)) << calls.size() << " calls";
  EXPECT_EQ(l.engine->snapshot().jobs.size(), 1u);
  l.push(gone, 1, 1, 1);
  const auto late = l.workers->receive(1, std::chrono::milliseconds(200));
  EXPECT_TRUE(late.empty()) << proto::opcode_name(late[0].hdr.opcode) << " " << proto::status_name(late[0].hdr.status)
                            << " job " << late[0].hdr.job_id << " round " << late[0].hdr.round;
  EXPECT_EQ(drops(*l.engine, Drop::unknown_port), 1u);
  // Its memory goes once nothing points into its result buffers any more.
  for (int i = 0; i < 100 && l.engine->retired_jobs() != 0; ++i) {
    l.engine->collect_retired();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(l.engine->retired_jobs(), 0u);
  EXPECT_EQ(l.round_trip(1, 0, 2, 2), 4.0f);
}

TEST(Reload, ARoundInProgressOfARemovedJobCompletesDuringTheDrain) {
  Live l({two_rank(1), two_rank(2)});
  l.cfg.timeouts.drain_ms = 5000;
  auto next = l.cfg;
  next.jobs.pop_back();
  const config::Job gone = l.job(2);
  l.push(gone, 0, 0, 1);
  std::thread finisher([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    l.push(gone, 1, 0, 2);
  });
  auto r = l.engine->apply(next);  // waits for the round (the next one is refused: draining)
  finisher.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->drain_timed_out);
  auto got = l.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(decode(got[0].payload, Dtype::fp32)[0], 3.0f);
}

TEST(Reload, WhatNeedsARestartChangesNothing) {
  Live l({two_rank(1)});
  EXPECT_EQ(l.round_trip(1, 0, 1, 2), 3.0f);
  const auto generation = l.engine->snapshot().generation;
  auto next = l.cfg;
  next.jobs[0].workers = 3;
  next.jobs[0].keys.push_back({"more", 9});
  next.limits.ring_entries *= 2;
  auto r = l.engine->apply(next);
  ASSERT_FALSE(r.has_value());
  ASSERT_EQ(r.error().size(), 3u);
  EXPECT_EQ(r.error()[0], "limits.ring_entries: changing the hand-off rings needs a restart");
  EXPECT_EQ(r.error()[1], "jobs[1].workers: changing workers needs a restart");
  EXPECT_EQ(r.error()[2], "jobs[1].keys: changing keys needs a restart");
  EXPECT_EQ(l.engine->snapshot().generation, generation);
  EXPECT_EQ(l.round_trip(1, 1, 1, 2), 3.0f);
  // A job the server cannot admit (over the memory limit) is refused whole too.
  auto big = l.cfg;
  big.jobs.push_back(make_job(7, 2, {1ull << 28}));
  big.jobs.back().quota_bytes = 1ull << 40;
  big.limits.memory_bytes = 1ull << 30;
  auto refused = l.engine->apply(big);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error()[0].find("memory"), std::string::npos) << refused.error()[0];
  EXPECT_EQ(l.engine->snapshot().generation, generation);
}

TEST(Reload, ARotatedSecretIsAcceptedDuringItsOverlapAndAnsweredInKind) {
  Live l({two_rank(1, "old-secret-0123456789")});
  EXPECT_EQ(l.round_trip(1, 0, 1, 1), 2.0f);
  auto next = l.cfg;
  next.jobs[0].secret = "new-secret-0123456789";
  next.timeouts.secret_overlap_ms = 400;
  l.apply(next);
  // Rank 0 still has the old secret, rank 1 the new one: both count, each is answered with its own key.
  const auto& j = l.job(1);
  l.push(j, 0, 1, 1, "old-secret-0123456789");
  l.push(j, 1, 1, 2, "new-secret-0123456789");
  auto got = l.workers->receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& r : got) {
    const bool old_key = r.hdr.rank == 0;
    std::array<std::byte, proto::kHeaderBytes> wire;
    proto::write_header(r.hdr, wire);
    const auto key = proto::derive_key(old_key ? "old-secret-0123456789" : "new-secret-0123456789", 1);
    EXPECT_EQ(r.hdr.auth_tag, proto::header_tag(key, wire)) << "rank " << r.hdr.rank;
  }
  // After the overlap the old secret is refused.
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  l.push(j, 0, 2, 1, "old-secret-0123456789");
  EXPECT_TRUE(l.workers->receive(1, std::chrono::milliseconds(200)).empty());
  EXPECT_EQ(drops(*l.engine, Drop::bad_tag), 1u);
}

TEST(Reload, DrainStopsNewRoundsAndResetStartsANewEpoch) {
  Live l({two_rank(1), two_rank(2)});
  EXPECT_EQ(l.round_trip(1, 0, 1, 1), 2.0f);
  ASSERT_TRUE(l.engine->drain("job1").has_value());
  l.push(l.job(1), 0, 1, 1);
  auto refused = l.workers->receive(1);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].hdr.status, proto::Status::draining);
  EXPECT_EQ(drops(*l.engine, Drop::draining), 1u);
  EXPECT_EQ(l.round_trip(2, 0, 1, 1), 2.0f);  // the other job goes on

  ASSERT_TRUE(l.engine->reset("job1").has_value());
  EXPECT_EQ(l.counters(1).resets, 1u);
  l.push(l.job(1), 0, 1, 1);  // epoch 0: the job is in epoch 1 now
  auto old = l.workers->receive(1);
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].hdr.status, proto::Status::epoch_mismatch);
  EXPECT_EQ(old[0].hdr.aux, 1u);
  EXPECT_FALSE(l.engine->drain("nosuchjob").has_value());
}

}  // namespace
}  // namespace phub::test
