// A ps client after its server restarted from a checkpoint, against the faulty loopback server playing the
// real server's epochs: workers of the run resume at the restored round (their operations in flight fail with
// PHUB_ERR_RESUMED, later ones too until phub_start_round), repeat their steps and get the sums of the repeated
// rounds; an epoch that starts at round 0 or that another run holds is an epoch error and claims no rank; a
// new run starts at the restored round by itself, or at 0 with fresh weights.
#include <gtest/gtest.h>

#include <barrier>
#include <string>
#include <thread>
#include <vector>

#include "faulty_server.hpp"
#include "phub/client.h"

namespace phub::client::test {
namespace {

const std::vector<uint64_t> kKeys{1000, 3000};  // one chunk each: one on each of the server's two lcores

FaultyServerOptions options() {
  FaultyServerOptions o;
  o.keys = kKeys;
  o.epochs = true;
  return o;
}

struct PsWorker {
  phub_client* c = nullptr;
  uint16_t rank;
  PsWorker(const FaultyServer& s, uint16_t r, bool fresh_weights = false, uint32_t timeout_ms = 5000) : rank(r) {
    phub_config cfg = s.client_config(r);
    cfg.mode = PHUB_MODE_PS;
    cfg.timeout_ms = timeout_ms;
    cfg.flags = fresh_weights ? PHUB_FLAG_FRESH_WEIGHTS : 0;
    EXPECT_EQ(phub_connect(&cfg, &c), PHUB_OK) << phub_last_error();
    for (uint32_t k = 0; k < kKeys.size(); ++k) EXPECT_EQ(phub_register(c, k, kKeys[k], PHUB_FP32), PHUB_OK);
  }
  ~PsWorker() { EXPECT_EQ(phub_close(c), PHUB_OK); }

  static float grad(uint16_t rank, uint32_t round, size_t i) {
    return static_cast<float>((i * 7 + round * 3 + rank * 13) % 19) - 9.0f;
  }
  // One step of every key for `round`: the status of the first that failed, else PHUB_OK; `wrong` counts
  // result elements that are not the sum of every rank's gradients of that round (what the server returns).
  int step(uint32_t round, uint64_t& wrong, uint16_t workers) {
    for (uint32_t k = 0; k < kKeys.size(); ++k) {
      std::vector<float> g(kKeys[k]), w(kKeys[k]);
      for (size_t i = 0; i < g.size(); ++i) g[i] = grad(rank, round, i);
      if (const int r = phub_step(c, k, g.data(), w.data()); r != PHUB_OK) return r;
      for (size_t i = 0; i < w.size(); ++i) {
        float want = 0;
        for (uint16_t q = 0; q < workers; ++q) want += grad(q, round, i);
        wrong += w[i] != want ? 1 : 0;
      }
    }
    return PHUB_OK;
  }
  uint32_t start_round() {
    uint32_t r = 12345;
    EXPECT_EQ(phub_start_round(c, &r), PHUB_OK) << phub_last_error();
    return r;
  }
};

void resume_and_repeat(bool sessions) {
  FaultyServerOptions o = options();
  if (sessions) {
    // The restart loses every session: the workers hear nothing until they join again (a new session).
    o.secret = "a-secret-of-twenty-bytes";
    o.sessions = true;
    o.payload_mac = true;
  }
  FaultyServer s(o);
  // After both ranks finished round 2 the server "restarts" from the checkpoint of round 1: round 2 is lost.
  std::barrier restored(o.workers, [&]() noexcept { s.restore(7, 2); });
  std::vector<std::thread> ranks;
  for (uint16_t rank = 0; rank < o.workers; ++rank) {
    ranks.emplace_back([&, rank] {
      PsWorker w(s, rank);
      uint64_t wrong = 0;
      EXPECT_EQ(w.start_round(), 0u);
      for (uint32_t r = 0; r < 3; ++r) ASSERT_EQ(w.step(r, wrong, o.workers), PHUB_OK) << phub_last_error();
      restored.arrive_and_wait();
      ASSERT_EQ(w.step(3, wrong, o.workers), PHUB_ERR_RESUMED);
      const std::string why = phub_last_error();
      EXPECT_NE(why.find("restored the state after round 1"), std::string::npos) << why;
      EXPECT_NE(why.find("resumes at round 2"), std::string::npos) << why;
      // Until the caller takes the round, every operation is void too: it was meant for a lost round.
      EXPECT_EQ(w.step(3, wrong, o.workers), PHUB_ERR_RESUMED);
      EXPECT_EQ(w.start_round(), 2u);
      for (uint32_t r = 2; r < 5; ++r) ASSERT_EQ(w.step(r, wrong, o.workers), PHUB_OK) << phub_last_error();
      EXPECT_EQ(wrong, 0u);
      phub_stats st{};
      ASSERT_EQ(phub_get_stats(w.c, &st), PHUB_OK);
      EXPECT_EQ(st.resumes, 1u);
      EXPECT_EQ(st.epoch, 7u);
      if (sessions) {
        EXPECT_GE(st.sessions, 4u);  // both lcores, before and after the restart
      }
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(ClientResume, PsWorkersResumeAtTheRestoredRoundAndRepeatTheirSteps) { resume_and_repeat(false); }
TEST(ClientResume, PsWorkersOfASessionsJobResumeAfterTheRestartLostTheirSessions) { resume_and_repeat(true); }

// Both ranks do one round, then the server's epoch changes as `restore` says; every rank's next step must fail
// with PHUB_ERR_EPOCH and a message containing `text`, and the rank must stay unclaimed.
void expect_no_resume(uint32_t first_round, uint32_t other_rank0, const char* text) {
  const FaultyServerOptions o = options();
  FaultyServer s(o);
  std::barrier restored(o.workers, [&]() noexcept { s.restore(7, first_round, other_rank0); });
  std::vector<std::thread> ranks;
  for (uint16_t rank = 0; rank < o.workers; ++rank) {
    ranks.emplace_back([&, rank] {
      PsWorker w(s, rank);
      uint64_t wrong = 0;
      ASSERT_EQ(w.step(0, wrong, o.workers), PHUB_OK) << phub_last_error();
      restored.arrive_and_wait();
      EXPECT_EQ(w.step(1, wrong, o.workers), PHUB_ERR_EPOCH);
      const std::string why = phub_last_error();
      EXPECT_NE(why.find(text), std::string::npos) << why;
      uint32_t r = 0;
      EXPECT_EQ(phub_start_round(w.c, &r), PHUB_ERR_EPOCH);  // and it stays so
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(s.holder(0), other_rank0);
  EXPECT_EQ(s.holder(1), 0u);  // the question claimed nothing: a new run's rank 1 can still join
}

TEST(ClientResume, AnEpochStartedAtRoundZeroIsAnEpochErrorAndClaimsNoRank) {
  expect_no_resume(0, 0, "at round 0");
}

TEST(ClientResume, ARestoredEpochAnotherRunHoldsIsAnEpochErrorAndClaimsNoRank) {
  expect_no_resume(2, 0xabcdu, "another run took it over");
}

TEST(ClientResume, AWorkerWhoseRankZeroNeverRejoinsGivesUpAtItsDeadline) {
  const FaultyServerOptions o = options();
  FaultyServer s(o);
  std::barrier restored(o.workers, [&]() noexcept { s.restore(7, 2); });
  std::thread rank0([&] {
    PsWorker w(s, 0);
    uint64_t wrong = 0;
    ASSERT_EQ(w.step(0, wrong, o.workers), PHUB_OK) << phub_last_error();
    restored.arrive_and_wait();  // and ends: its process is gone with the server
  });
  PsWorker w(s, 1, false, 400);
  uint64_t wrong = 0;
  ASSERT_EQ(w.step(0, wrong, o.workers), PHUB_OK) << phub_last_error();
  restored.arrive_and_wait();
  rank0.join();
  EXPECT_EQ(w.step(1, wrong, o.workers), PHUB_ERR_EPOCH);
  const std::string why = phub_last_error();
  EXPECT_NE(why.find("this run's rank 0 did not join the restored epoch"), std::string::npos) << why;
  EXPECT_EQ(s.holder(1), 0u);  // it only asked
}

TEST(ClientResume, ANewRunStartsAtTheRestoredRoundOrAtZeroWithFreshWeights) {
  const FaultyServerOptions o = options();
  FaultyServer s(o);
  s.restore(7, 5);  // a server that restored the checkpoint of round 4 before any worker came
  for (const bool fresh : {false, true}) {
    std::vector<std::thread> ranks;
    for (uint16_t rank = 0; rank < o.workers; ++rank) {
      ranks.emplace_back([&, rank] {
        PsWorker w(s, rank, fresh && rank == 0);
        const uint32_t first = w.start_round();
        EXPECT_EQ(first, fresh ? 0u : 5u) << (fresh ? "fresh weights restart the job" : "the run resumes");
        uint64_t wrong = 0;
        ASSERT_EQ(w.step(first, wrong, o.workers), PHUB_OK) << phub_last_error();
        EXPECT_EQ(wrong, 0u);
        phub_stats st{};
        ASSERT_EQ(phub_get_stats(w.c, &st), PHUB_OK);
        EXPECT_EQ(st.epoch, fresh ? 8u : 7u);
        EXPECT_EQ(st.resumes, 0u);  // no operation was lost: nothing to resume from
      });
    }
    for (auto& t : ranks) t.join();
  }
}

}  // namespace
}  // namespace phub::client::test
