// The client end to end against the loopback fake server: allreduce results, split push/pull, loss,
// duplication and reordering on both sides, and every server failure mapped to its code and message.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "fake_server.hpp"
#include "phub/client.h"

namespace phub::client::test {
namespace {

const std::vector<uint64_t> kKeys{1000, 20000, 1};

phub_config config_for(const FakeServer& s, const FakeServerOptions& o, uint16_t rank) {
  phub_config c;
  phub_config_init(&c);
  c.servers = "127.0.0.1";
  c.port_base = s.port_base();
  c.server_lcores = o.lcores;
  c.job_id = o.job_id;
  c.rank = rank;
  c.workers = o.workers;
  c.secret = o.secret.c_str();
  c.reduce = o.mean ? PHUB_REDUCE_MEAN : PHUB_REDUCE_SUM;
  c.timeout_ms = 5000;
  c.rto_initial_us = 20000;
  c.rto_min_us = 5000;
  c.rto_max_us = 50000;
  return c;
}

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

// Runs `rounds` allreduces of every key on each rank (one thread per rank) and counts wrong elements.
uint64_t run_rounds(const FakeServer& s, const FakeServerOptions& o, uint32_t rounds, bool split,
                    const phub_config* overrides = nullptr) {
  std::vector<uint64_t> bad(o.workers, 0);
  std::vector<std::thread> threads;
  for (uint16_t rank = 0; rank < o.workers; ++rank) {
    threads.emplace_back([&, rank] {
      phub_config cfg = overrides != nullptr ? *overrides : config_for(s, o, rank);
      cfg.rank = rank;
      cfg.fault_seed = rank + 1u;
      Worker w(cfg);
      for (uint32_t r = 0; r < rounds; ++r) {
        std::vector<std::vector<float>> bufs(kKeys.size());
        std::vector<phub_request*> reqs(kKeys.size());
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          bufs[k].resize(kKeys[k]);
          for (size_t i = 0; i < kKeys[k]; ++i) bufs[k][i] = grad(rank, r, k, i);
          if (split) {
            ASSERT_EQ(phub_push(w.c, k, bufs[k].data()), PHUB_OK) << phub_last_error();
          } else {
            ASSERT_EQ(phub_allreduce_async(w.c, k, bufs[k].data(), &reqs[k]), PHUB_OK) << phub_last_error();
          }
        }
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          const int st = split ? phub_pull(w.c, k, bufs[k].data()) : phub_wait(w.c, reqs[k]);
          ASSERT_EQ(st, PHUB_OK) << phub_last_error();
          for (size_t i = 0; i < kKeys[k]; ++i) {
            float want = 0;
            for (uint16_t q = 0; q < o.workers; ++q) want += grad(q, r, k, i);
            if (o.mean) want *= 1.0f / static_cast<float>(o.workers);
            bad[rank] += bufs[k][i] != want ? 1 : 0;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  uint64_t total = 0;
  for (uint64_t b : bad) total += b;
  return total;
}

TEST(ClientLoopback, AllreduceSumsAndMeans) {
  for (bool mean : {false, true}) {
    FakeServerOptions o;
    o.keys = kKeys;
    o.mean = mean;
    o.secret = "s3cret";
    FakeServer s(o);
    EXPECT_EQ(run_rounds(s, o, 5, false), 0u);
    // Segments of 352 elements per chunk of 8192: 1000 -> 3; 20000 -> 24 + 24 + 11 (8192, 8192, 3616); 1 -> 1.
    EXPECT_EQ(s.first_pushes(), 5u * 2 * (3 + 24 + 24 + 11 + 1));
  }
}

TEST(ClientLoopback, SplitPushPull) {
  FakeServerOptions o;
  o.keys = kKeys;
  o.workers = 3;
  FakeServer s(o);
  EXPECT_EQ(run_rounds(s, o, 4, true), 0u);
}

TEST(ClientLoopback, SurvivesLossDuplicationAndReordering) {
  FakeServerOptions o;
  o.keys = kKeys;
  o.drop_every = 13;
  o.duplicate_results = true;
  FakeServer s(o);
  phub_config cfg = config_for(s, o, 0);
  cfg.fault_drop_tx_ppm = 30000;
  cfg.fault_drop_rx_ppm = 30000;
  cfg.fault_dup_tx_ppm = 30000;
  cfg.fault_reorder_tx_ppm = 30000;
  EXPECT_EQ(run_rounds(s, o, 6, false, &cfg), 0u);
  EXPECT_GT(s.retransmit_flags(), 0u);  // losses were repaired by retransmits
}

struct Failure {
  int code;
  std::string message;
};

// One allreduce of key 1 by rank 0 alone against a misbehaving server.
Failure fail_once(FakeServerOptions o, uint32_t timeout_ms, const char* client_secret = nullptr, bool client_mean = false) {
  o.keys = kKeys;
  FakeServer s(o);
  phub_config cfg = config_for(s, o, 0);
  cfg.timeout_ms = timeout_ms;
  if (client_secret != nullptr) cfg.secret = client_secret;
  if (client_mean) cfg.reduce = PHUB_REDUCE_MEAN;
  Worker w(cfg);
  std::vector<float> buf(kKeys[1], 1.0f);
  Failure f;
  f.code = phub_allreduce(w.c, 1, buf.data());
  f.message = phub_last_error();
  // After a failure the rounds may be out of step: the client refuses to go on.
  EXPECT_EQ(phub_allreduce(w.c, 0, buf.data()), PHUB_ERR_BROKEN);
  return f;
}

TEST(ClientLoopback, NoAnswerIsUnreachableWithAnAuthHint) {
  FakeServerOptions o;
  o.mute = true;
  const Failure f = fail_once(o, 300);
  EXPECT_EQ(f.code, PHUB_ERR_UNREACHABLE);
  EXPECT_NE(f.message.find("no answer from 127.0.0.1"), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("secret"), std::string::npos) << f.message;
}

TEST(ClientLoopback, WrongSecretIsNoAnswer) {
  FakeServerOptions o;
  o.secret = "right";
  o.workers = 1;
  const Failure f = fail_once(o, 300, "wrong");
  EXPECT_EQ(f.code, PHUB_ERR_UNREACHABLE);
  EXPECT_NE(f.message.find("bad_tag"), std::string::npos) << f.message;
}

TEST(ClientLoopback, WrongTagsFromTheServerAreAuthErrors) {
  FakeServerOptions o;
  o.secret = "right";
  o.workers = 1;
  o.wrong_tag = true;
  const Failure f = fail_once(o, 300);
  EXPECT_EQ(f.code, PHUB_ERR_AUTH);
  EXPECT_NE(f.message.find("wrong auth tag"), std::string::npos) << f.message;
}

TEST(ClientLoopback, ServerErrorsBecomeCodes) {
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
    FakeServerOptions o;
    o.error_status = c.status;
    o.error_aux = c.aux;
    const Failure f = fail_once(o, 400);
    EXPECT_EQ(f.code, c.code) << f.message;
    EXPECT_NE(f.message.find(c.text), std::string::npos) << f.message;
  }
}

TEST(ClientLoopback, ReductionMismatchIsAConfigError) {
  FakeServerOptions o;
  o.workers = 1;
  const Failure f = fail_once(o, 1000, nullptr, true);  // the client expects a mean, the server sums
  EXPECT_EQ(f.code, PHUB_ERR_CONFIG_MISMATCH);
  EXPECT_NE(f.message.find("config.reduce"), std::string::npos) << f.message;
}

TEST(ClientLoopback, CloseSendsLeave) {
  FakeServerOptions o;
  o.keys = kKeys;
  FakeServer s(o);
  { Worker w(config_for(s, o, 0)); }
  for (int i = 0; i < 100 && s.leaves() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(s.leaves(), 2u);  // one per server lcore
}

}  // namespace
}  // namespace phub::client::test
