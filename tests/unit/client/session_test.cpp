// The client's sessions (protocol v3, docs/protocol.md "Sessions") against the faulty loopback server, which
// derives the session keys from the joins it receives as phub-server does: a sessions job completes its
// rounds; a result or error replayed byte for byte, an error forged without the session keys and a result
// whose payload was altered on the way end nothing and are counted. Each attack also runs against a job
// without sessions, where it does harm: the tests show the protection, not a server that never attacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "faulty_server.hpp"
#include "phub/client.h"

namespace phub::client::test {
namespace {

const std::vector<uint64_t> kKeys{1000, 20000, 1};
const std::string kSecret = "a-secret-of-twenty-bytes";

float grad(uint16_t rank, uint32_t round, uint32_t key, size_t i) {
  return static_cast<float>((i * 3 + round * 5 + key + rank * 11) % 23) - 11.0f;
}

struct Outcome {
  uint64_t bad_elems = 0;
  int first_error = PHUB_OK;  // the first failed wait of any rank (BROKEN: a post failed before)
  std::string message;
  std::vector<int> codes;     // every failed post and wait
  phub_stats stats{};         // counters summed over the ranks
};

void add(phub_stats& to, const phub_stats& s) {
  to.retransmits += s.retransmits;
  to.duplicates += s.duplicates;
  to.stale += s.stale;
  to.bad_tag += s.bad_tag;
  to.errors_received += s.errors_received;
  to.stalls_reported += s.stalls_reported;
  to.replayed += s.replayed;
  to.bad_mac += s.bad_mac;
  to.bad_checksum += s.bad_checksum;
  to.sessions += s.sessions;
  to.rejoins += s.rejoins;
  to.interface_moves += s.interface_moves;
}

// A retransmit timeout floor for the tests that count every session and every refused packet exactly: with
// the harness's 5 ms floor, a rank thread starved for two timeouts on a loaded box (ASan, suites in parallel)
// makes its peer rejoin: a session more than counted, and the faulty server (which switches at once) refuses
// the old one's packets still in flight. None of these tests loses a packet, so the floor costs them no time.
constexpr uint32_t kSteadyRtoUs = 250'000;

// `rounds` allreduces of every key on each rank (a thread per rank); a rank stops at its first failed wait.
// rto_min_us = 0 keeps the client's default floor. The last rank sleeps last_rank_late_ms before each round.
Outcome run(FaultyServer& server, const FaultyServerOptions& o, uint32_t rounds, uint32_t rto_min_us = 0,
            uint32_t last_rank_late_ms = 0, uint32_t flags = 0) {
  std::vector<Outcome> per(o.workers);
  std::vector<std::thread> threads;
  for (uint16_t rank = 0; rank < o.workers; ++rank) {
    threads.emplace_back([&, rank] {
      phub_config cfg = server.client_config(rank);
      cfg.timeout_ms = 3000;
      cfg.flags |= flags;
      if (rto_min_us != 0) {
        cfg.rto_min_us = rto_min_us;
        cfg.rto_initial_us = std::max(cfg.rto_initial_us, rto_min_us);
        cfg.rto_max_us = std::max(cfg.rto_max_us, 4 * rto_min_us);
      }
      phub_client* c = nullptr;
      ASSERT_EQ(phub_connect(&cfg, &c), PHUB_OK) << phub_last_error();
      for (uint32_t k = 0; k < kKeys.size(); ++k) ASSERT_EQ(phub_register(c, k, kKeys[k], PHUB_FP32), PHUB_OK);
      for (uint32_t r = 0; r < rounds && per[rank].first_error == PHUB_OK; ++r) {
        if (rank + 1 == o.workers && last_rank_late_ms != 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(last_rank_late_ms));
        }
        std::vector<std::vector<float>> bufs(kKeys.size());
        std::vector<phub_request*> reqs(kKeys.size(), nullptr);
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          bufs[k].resize(kKeys[k]);
          for (size_t i = 0; i < kKeys[k]; ++i) bufs[k][i] = grad(rank, r, k, i);
          // Posting drives traffic too: an earlier key's operation may fail meanwhile (then: broken).
          const int rc = phub_allreduce_async(c, k, bufs[k].data(), &reqs[k]);
          if (rc != PHUB_OK) {
            per[rank].codes.push_back(rc);
            reqs[k] = nullptr;
          }
        }
        for (uint32_t k = 0; k < kKeys.size(); ++k) {
          if (reqs[k] == nullptr) {
            if (per[rank].first_error == PHUB_OK) per[rank].first_error = PHUB_ERR_BROKEN;
            continue;
          }
          const int rc = phub_wait(c, reqs[k]);
          if (rc != PHUB_OK) per[rank].codes.push_back(rc);
          if (rc != PHUB_OK) {
            if (per[rank].first_error == PHUB_OK) {
              per[rank].first_error = rc;
              per[rank].message = phub_last_error();
            }
            continue;
          }
          for (size_t i = 0; i < kKeys[k]; ++i) {
            float want = 0;
            for (uint16_t q = 0; q < o.workers; ++q) want += grad(q, r, k, i);
            per[rank].bad_elems += bufs[k][i] != want ? 1 : 0;
          }
        }
      }
      ASSERT_EQ(phub_get_stats(c, &per[rank].stats), PHUB_OK);
      (void)phub_close(c);
    });
  }
  for (auto& t : threads) t.join();
  Outcome total;
  for (const Outcome& p : per) {
    total.bad_elems += p.bad_elems;
    if (total.first_error == PHUB_OK) {
      total.first_error = p.first_error;
      total.message = p.message;
    }
    total.codes.insert(total.codes.end(), p.codes.begin(), p.codes.end());
    add(total.stats, p.stats);
  }
  return total;
}

FaultyServerOptions session_job(bool payload_mac) {
  FaultyServerOptions o;
  o.keys = kKeys;
  o.secret = kSecret;
  o.sessions = true;
  o.payload_mac = payload_mac;
  return o;
}

TEST(ClientSessions, ChunksGoToTheInterfaceTheJoinedAnswerNames) {
  // The chunk-to-interface map: the last lcore names 127.0.0.2 in its joined answers. Each rank joins it again
  // there (a session made at that address), sends it every push there, and every result is right.
  FaultyServerOptions o = session_job(false);
  o.interface_map = true;
  Outcome out;
  uint64_t at = 0, off = 0, sessions = 0;
  {
    FaultyServer server(o);
    out = run(server, o, 5, kSteadyRtoUs);
    at = server.pushes_at_interface();
    off = server.pushes_off_interface();
    sessions = server.sessions_made();
  }
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_EQ(out.stats.interface_moves, o.workers);  // one lcore moved per rank
  EXPECT_GT(at, 0u);
  EXPECT_EQ(off, 0u);
  EXPECT_EQ(sessions, uint64_t{o.workers} * o.lcores);  // the sessions made at the interface only
  EXPECT_EQ(out.stats.bad_tag, 0u);
  // PHUB_FLAG_ONE_ADDRESS: every push to the address given, nothing moved; still right.
  {
    FaultyServer server(o);
    out = run(server, o, 5, kSteadyRtoUs, 0, PHUB_FLAG_ONE_ADDRESS);
    at = server.pushes_at_interface();
    off = server.pushes_off_interface();
  }
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_EQ(out.stats.interface_moves, 0u);
  EXPECT_EQ(at, 0u);
  EXPECT_GT(off, 0u);
}

TEST(ClientSessions, ASessionJobCompletesItsRounds) {
  for (bool mac : {false, true}) {
    SCOPED_TRACE(mac ? "payload_mac" : "sessions");
    const FaultyServerOptions o = session_job(mac);
    Outcome out;
    {
      FaultyServer server(o);
      out = run(server, o, 5, kSteadyRtoUs);
      // One session per rank and lcore, and every packet of the clients opened under it.
      EXPECT_EQ(server.sessions_made(), uint64_t{o.workers} * o.lcores);
      EXPECT_EQ(server.session_drops(), 0u);
    }
    EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
    EXPECT_EQ(out.bad_elems, 0u);
    EXPECT_EQ(out.stats.sessions, uint32_t{o.workers} * o.lcores);
    EXPECT_EQ(out.stats.bad_tag, 0u);
    EXPECT_EQ(out.stats.replayed, 0u);
    EXPECT_EQ(out.stats.bad_mac, 0u);
  }
}

TEST(ClientSessions, ASecretJobWithoutSessionsStillWorks) {
  FaultyServerOptions o = session_job(false);
  o.sessions = false;
  FaultyServer server(o);
  const Outcome out = run(server, o, 3);
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_EQ(out.stats.sessions, 0u);
  EXPECT_EQ(server.sessions_made(), 0u);
}

// Every result and error arrives twice, and the first result and error of each rank come again after every
// later result: genuine packets, byte for byte. The errors are harmless round_stalled reports, so that the
// count of those taken shows whether a replay was taken.
FaultyServerOptions replaying(FaultyServerOptions o) {
  o.duplicate_results = true;
  o.duplicate_errors = true;
  o.stall_errors = true;
  o.replay_first = true;
  return o;
}

TEST(ClientSessions, ReplayedResultsAndErrorsAreIgnoredAndCounted) {
  const FaultyServerOptions o = replaying(session_job(false));
  uint64_t errors_sent = 0;
  Outcome out;
  {
    FaultyServer server(o);
    out = run(server, o, 4, kSteadyRtoUs);
    errors_sent = server.errors_sent();
  }
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  ASSERT_GT(errors_sent, 0u);
  // Each genuine error taken once; its copies and replays refused before they reach the operation.
  EXPECT_EQ(out.stats.errors_received, errors_sent);
  EXPECT_EQ(out.stats.stalls_reported, errors_sent);
  EXPECT_GT(out.stats.replayed, errors_sent);
  EXPECT_EQ(out.stats.duplicates, 0u);  // a duplicated result never got as far as the result tracker
  EXPECT_EQ(out.stats.rejoins, 0u);
  EXPECT_EQ(out.stats.bad_tag, 0u);
}

TEST(ClientSessions, WithoutSessionsTheSameReplaysAreTaken) {
  FaultyServerOptions o = replaying(session_job(false));
  o.sessions = false;
  uint64_t errors_sent = 0;
  Outcome out;
  {
    FaultyServer server(o);
    out = run(server, o, 4);
    errors_sent = server.errors_sent();
  }
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.stats.replayed, 0u);
  EXPECT_GT(out.stats.stalls_reported, errors_sent);  // the job key's tags cannot tell a replay
  EXPECT_GT(out.stats.duplicates, 0u);
}

TEST(ClientSessions, ErrorsForgedWithoutTheSessionKeysEndNothing) {
  FaultyServerOptions o = session_job(false);
  o.forge_errors = true;
  FaultyServer server(o);
  const Outcome out = run(server, o, 3);
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_GT(out.stats.bad_tag, 0u);  // both forgeries of every push, as far as they arrived before the op ended
  EXPECT_EQ(out.stats.errors_received, 0u);
}

TEST(ClientSessions, WithoutSessionsAnErrorUnderTheJobKeyEndsTheOperation) {
  FaultyServerOptions o = session_job(false);
  o.sessions = false;
  o.forge_errors = true;
  FaultyServer server(o);
  const Outcome out = run(server, o, 3);
  ASSERT_FALSE(out.codes.empty());
  EXPECT_NE(std::find(out.codes.begin(), out.codes.end(), PHUB_ERR_DRAINED), out.codes.end()) << out.message;
}

// 4 rounds against a server that alters the payload of every 7th result after sealing it (keeping its
// CRC32C as it was with keep_crc); `corrupted` gets how many it altered.
Outcome run_altering(FaultyServerOptions o, bool keep_crc, uint64_t* corrupted) {
  o.corrupt_every = 7;
  o.corrupt_keeps_crc = keep_crc;
  FaultyServer server(o);
  Outcome out = run(server, o, 4);
  *corrupted = server.results_corrupted();
  return out;
}

// The client takes no altered element: it waits for the segment as for a lost one and pushes again, and the
// server's answer to the resend (a new packet) completes the operation. Every altered result that arrived
// was refused (`refused`); a few (answers to the last resends) may find the client closed already.
void expect_altered_refused(const Outcome& out, uint64_t corrupted, uint64_t refused) {
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  ASSERT_GT(corrupted, 0u);
  EXPECT_GT(refused, 0u);
  EXPECT_LE(refused, corrupted);
  EXPECT_GT(out.stats.retransmits, 0u);
}

TEST(ClientSessions, AlteredPayloadsAreRefusedAndTheResultsResent) {
  uint64_t corrupted = 0;
  const Outcome out = run_altering(session_job(true), false, &corrupted);
  expect_altered_refused(out, corrupted, out.stats.bad_mac);
}

// Without payload MACs every result still carries its CRC32C, which the header's tag covers: a payload
// changed on the way (a faulty link, or an attacker) is refused and asked again, with and without sessions.
TEST(ClientSessions, WithoutPayloadMacsTheChecksumRefusesAnAlteredPayload) {
  for (bool sessions : {true, false}) {
    SCOPED_TRACE(sessions ? "sessions" : "job key");
    FaultyServerOptions o = session_job(false);
    o.sessions = sessions;
    uint64_t corrupted = 0;
    const Outcome out = run_altering(o, false, &corrupted);
    expect_altered_refused(out, corrupted, out.stats.bad_checksum);
    EXPECT_EQ(out.stats.bad_mac, 0u);
  }
}

// What the checksum is not: an attacker who changes the payload so that its CRC32C stays the same (CRCs are
// linear) gets the change taken. The payload MAC is the defence (docs/security.md, "Results").
TEST(ClientSessions, WithoutPayloadMacsAChangeThatKeepsTheCrcIsTaken) {
  uint64_t corrupted = 0;
  const Outcome taken = run_altering(session_job(false), true, &corrupted);
  EXPECT_EQ(taken.first_error, PHUB_OK) << taken.message;
  EXPECT_EQ(taken.stats.bad_checksum, 0u);
  EXPECT_GT(taken.bad_elems, 0u);
  const Outcome refused = run_altering(session_job(true), true, &corrupted);
  expect_altered_refused(refused, corrupted, refused.stats.bad_mac);
}

// A result without any checksum was not sent by a phub server: refused, counted, and the operation does not
// complete on it (the deadline ends it).
TEST(ClientSessions, AResultWithoutAChecksumIsRefused) {
  FaultyServerOptions o = session_job(false);
  o.sessions = false;
  o.unprotected_results = true;
  FaultyServer server(o);
  const Outcome out = run(server, o, 1);
  EXPECT_NE(out.first_error, PHUB_OK);
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_GT(out.stats.bad_checksum, 0u);
}

TEST(ClientSessions, AJoinAfterSilenceMakesANewSessionAndTheRoundsGoOn) {
  FaultyServerOptions o = session_job(true);
  o.silent_after_results = 40;
  o.silent_ms = 300;
  uint64_t made = 0;
  Outcome out;
  {
    FaultyServer server(o);
    out = run(server, o, 4);
    made = server.sessions_made();
  }
  // The joins after the silence carry new nonces: the server makes new sessions, both sides switch to them
  // and the operations finish under them.
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_GT(out.stats.rejoins, 0u);
  EXPECT_GT(made, uint64_t{o.workers} * o.lcores);
  EXPECT_EQ(out.stats.sessions, made);
}

TEST(ClientSessions, AnswersUnderTheSessionARejoinReplacedAreStillTaken) {
  // As the real server: a rejoin's session is pending until the rank's first packet under it, and the server
  // goes on answering under the old one meanwhile. The last rank comes 80 ms late to every round: the others
  // hear nothing for two timeouts and join again, and its push often completes the round before their first
  // packet under the new session (results under the old one). The client opens those under the session it
  // replaced; without that each was a bad_tag, lost, and asked for again one timeout later (seen in the
  // hier test: up to 483 per rank on a loaded box, and operations past their deadline).
  FaultyServerOptions o = session_job(true);
  o.switch_on_first_packet = true;
  Outcome out;
  uint64_t pending_answers = 0;
  {
    FaultyServer server(o);
    out = run(server, o, 12, 0, 80);
    pending_answers = server.sealed_while_pending();
  }
  EXPECT_EQ(out.first_error, PHUB_OK) << out.message;
  EXPECT_EQ(out.bad_elems, 0u);
  EXPECT_GT(out.stats.rejoins, 0u);
  EXPECT_GT(pending_answers, 0u);  // the case arose
  EXPECT_EQ(out.stats.bad_tag, 0u);
  EXPECT_EQ(out.stats.replayed, 0u);
}

}  // namespace
}  // namespace phub::client::test
