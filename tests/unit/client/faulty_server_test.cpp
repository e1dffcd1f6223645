// The client's recovery against the faulty loopback server: loss, duplication and reordering on both
// sides repaired with correct results, losses found by later results (not only by timers), needless early
// resends undone; and every misbehaviour of a server (wrong tags, error opcodes, silence) mapped to its
// code and message. The normal path runs against the real phub-server (tests/system/client).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "faulty_server.hpp"
#include "phub/client.h"

namespace phub::client::test {
namespace {

const std::vector<uint64_t> kKeys{1000, 20000, 1};

// A connected client with the test keys registered.
struct Worker {
  phub_client* c = nullptr;
  explicit Worker(const phub_config& cfg) {
    EXPECT_EQ(phub_connect(&cfg, &c), PHUB_OK) << phub_last_error();
    for (uint32_t k = 0; k < kKeys.size(); ++k) EXPECT_EQ(phub_register(c, k, kKeys[k], PHUB_FP32), PHUB_OK);
  }
  ~Worker() { EXPECT_EQ(phub_close(c), PHUB_OK); }
};

float grad(uint16_t rank, uint32_t round, uint32_t key, size_t i) {
  return static_cast<float>((i * 3 + round * 5 + key + rank * 11) % 23) - 11.0f;
}

struct Totals {
  uint64_t bad_elems = 0;
  phub_stats stats{};  // summed over the ranks (counters only)
};

// Runs `rounds` allreduces of every key on each rank (one thread per rank), counts wrong elements and sums
// the ranks' recovery counters.
Totals run_rounds(const FaultyServerOptions& o, uint32_t rounds, const phub_config& base) {
  std::vector<Totals> per(o.workers);
  std::vector<std::thread> threads;
  for (uint16_t rank = 0; rank < o.workers; ++rank) {
    threads.emplace_back([&, rank] {
      phub_config cfg = base;
      cfg.rank = rank;
      cfg.fault_seed = rank + 1u;
      Worker w(cfg);
      for (uint32_t r = 0; r < rounds; ++r) {
        std::vector<std::vector<float>> bufs(kKeys.size());
        std::vector<phub_request*> reqs(kKeys.size());
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          bufs[k].resize(kKeys[k]);
          for (size_t i = 0; i < kKeys[k]; ++i) bufs[k][i] = grad(rank, r, k, i);
          ASSERT_EQ(phub_allreduce_async(w.c, k, bufs[k].data(), &reqs[k]), PHUB_OK) << phub_last_error();
        }
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          ASSERT_EQ(phub_wait(w.c, reqs[k]), PHUB_OK) << phub_last_error();
          for (size_t i = 0; i < kKeys[k]; ++i) {
            float want = 0;
            for (uint16_t q = 0; q < o.workers; ++q) want += grad(q, r, k, i);
            per[rank].bad_elems += bufs[k][i] != want ? 1 : 0;
          }
        }
      }
      ASSERT_EQ(phub_get_stats(w.c, &per[rank].stats), PHUB_OK);
    });
  }
  for (auto& t : threads) t.join();
  Totals total;
  for (const Totals& t : per) {
    total.bad_elems += t.bad_elems;
    total.stats.retransmits += t.stats.retransmits;
    total.stats.fast_retransmits += t.stats.fast_retransmits;
    total.stats.timeouts += t.stats.timeouts;
    total.stats.needless_resends += t.stats.needless_resends;
    total.stats.stale += t.stats.stale;
  }
  return total;
}

TEST(ClientFaultyServer, RepairsLossDuplicationAndReordering) {
  FaultyServerOptions o;
  o.keys = kKeys;
  o.drop_every = 13;
  o.duplicate_results = true;
  FaultyServer s(o);
  phub_config cfg = s.client_config(0);
  cfg.fault_drop_tx_ppm = 30000;
  cfg.fault_drop_rx_ppm = 30000;
  cfg.fault_dup_tx_ppm = 30000;
  cfg.fault_reorder_tx_ppm = 30000;
  const Totals t = run_rounds(o, 6, cfg);
  EXPECT_EQ(t.bad_elems, 0u);
  EXPECT_GT(s.retransmit_flags(), 0u);  // losses were repaired by retransmits
}

TEST(ClientFaultyServer, AnEpochErrorAnsweringAnotherEpochIsStale) {
  // Each push also draws an authentic epoch_mismatch that answered a packet of epoch 7 (the job's epoch 8):
  // what an attacker gets by replaying a push of an earlier run, and sends to the workers of this one.
  FaultyServerOptions o;
  o.keys = kKeys;
  o.secret = "a-secret-of-twenty-bytes";
  o.replayed_epoch_error = 7;
  FaultyServer s(o);
  const Totals t = run_rounds(o, 4, s.client_config(0));
  EXPECT_EQ(t.bad_elems, 0u);
  EXPECT_GE(t.stats.stale, s.first_pushes()) << "every replayed error set aside";
}

phub_config with_one_second_timers(phub_config c) {
  c.rto_initial_us = c.rto_min_us = c.rto_max_us = 1000000;
  c.timeout_ms = 20000;
  return c;
}

TEST(ClientFaultyServer, LaterResultsRevealLossesBeforeTheTimer) {
  // Every 29th push is lost. With a retransmit timeout of a second, timers alone would take longer than the
  // deadline; results for later pushes reveal most losses at once.
  FaultyServerOptions o;
  o.keys = kKeys;
  o.drop_every = 29;
  FaultyServer s(o);
  const Totals t = run_rounds(o, 4, with_one_second_timers(s.client_config(0)));
  EXPECT_EQ(t.bad_elems, 0u);
  EXPECT_GT(t.stats.fast_retransmits, 0u);
  EXPECT_LT(t.stats.timeouts, t.stats.fast_retransmits);
}

TEST(ClientFaultyServer, ResultsOvertakenByLaterOnesAreNotLosses) {
  // Every 17th result is held back for 20 ms: the client may push again early, but the late result then
  // shows the resend to have been needless (the window's cut is undone, the reordering window widens).
  FaultyServerOptions o;
  o.keys = kKeys;
  o.hold_every = 17;
  o.hold_ms = 20;
  FaultyServer s(o);
  // Enough rounds that most held results come back while the clients still listen (a round takes a few ms).
  const Totals t = run_rounds(o, 16, s.client_config(0));
  EXPECT_EQ(t.bad_elems, 0u);
  EXPECT_GT(t.stats.fast_retransmits, 0u);
  EXPECT_GT(t.stats.needless_resends, 0u);
}

struct Failure {
  int code;
  std::string message;
};

// One allreduce of key 1 by rank 0 alone against a misbehaving server.
Failure fail_once(FaultyServerOptions o, uint32_t timeout_ms) {
  o.keys = kKeys;
  FaultyServer s(o);
  phub_config cfg = s.client_config(0);
  cfg.timeout_ms = timeout_ms;
  Worker w(cfg);
  std::vector<float> buf(kKeys[1], 1.0f);
  Failure f;
  f.code = phub_allreduce(w.c, 1, buf.data());
  f.message = phub_last_error();
  // After a failure the rounds may be out of step: the client refuses to go on.
  EXPECT_EQ(phub_allreduce(w.c, 0, buf.data()), PHUB_ERR_BROKEN);
  return f;
}

TEST(ClientFaultyServer, NoAnswerIsUnreachableWithAnAuthHint) {
  FaultyServerOptions o;
  o.mute = true;
  const Failure f = fail_once(o, 300);
  EXPECT_EQ(f.code, PHUB_ERR_UNREACHABLE);
  EXPECT_NE(f.message.find("no answer from 127.0.0.1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("secret"), std::string::npos) << f.message;
}

TEST(ClientFaultyServer, WrongTagsFromTheServerAreAuthErrors) {
  FaultyServerOptions o;
  o.secret = "right";
  o.workers = 1;
  o.wrong_tag = true;
  const Failure f = fail_once(o, 300);
  EXPECT_EQ(f.code, PHUB_ERR_AUTH);
  EXPECT_NE(f.message.find("wrong auth tag"), std::string::npos) << f.message;
}

TEST(ClientFaultyServer, ServerErrorsBecomeCodes) {
  struct Case {
    proto::Status status;
    uint32_t aux;
    int code;
    const char* text;
  };
  const Case cases[] = {
      {proto::Status::unknown_chunk, 5, PHUB_ERR_CHUNK_MAP, "has 5 chunks"},
      {proto::Status::bad_request, 352, PHUB_ERR_CHUNK_MAP, "another length"},
      {proto::Status::bad_request, 704, PHUB_ERR_CHUNK_MAP, "expects 704 elements per packet"},
      {proto::Status::round_behind, 9, PHUB_ERR_ROUND_MISMATCH, "server on round 9"},
      {proto::Status::round_stalled, 1, PHUB_ERR_ROUND_STALLED, "waiting for rank 1"},
  };
  for (const auto& c : cases) {
    FaultyServerOptions o;
    o.error_status = c.status;
    o.error_aux = c.aux;
    const Failure f = fail_once(o, 400);
    EXPECT_EQ(f.code, c.code) << f.message;
    EXPECT_NE(f.message.find(c.text), std::string::npos) << f.message;
  }
}

TEST(ClientFaultyServer, ResultsFlaggedWithAnotherReductionAreConfigErrors) {
  FaultyServerOptions o;
  o.workers = 1;
  o.flag_mean = true;  // the job sums, yet the results claim to be means
  const Failure f = fail_once(o, 1000);
  EXPECT_EQ(f.code, PHUB_ERR_CONFIG_MISMATCH);
  EXPECT_NE(f.message.find("config.reduce"), std::string::npos) << f.message;
}

TEST(ClientFaultyServer, CloseSendsLeaveEvenToASilentServer) {
  FaultyServerOptions o;
  o.keys = kKeys;
  o.mute = true;
  FaultyServer s(o);
  { Worker w(s.client_config(0)); }
  for (int i = 0; i < 100 && s.leaves() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.leaves(), 2u);  // one per server lcore
}

}  // namespace
}  // namespace phub::client::test
