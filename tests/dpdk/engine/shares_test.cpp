// Tenant shares: a job flooding the hand-off rings or the transmit buffers is dropped against itself,
// within its share, and the other jobs' rounds complete with nothing dropped against them.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "harness.hpp"
#include "phub/engine/tenant_shares.hpp"
#include "phub/proto/auth.hpp"

namespace phub::test {
namespace {

using engine::Drop;

uint64_t job_drops(const engine::Engine& e, size_t j, Drop d) { return job_counters(e, j).drops[static_cast<size_t>(d)]; }

uint64_t all_job_drops(const engine::Engine& e, size_t j) {
  uint64_t n = 0;
  for (uint64_t d : job_counters(e, j).drops) n += d;
  return n;
}

// What the server sent job `job_id` (`count` messages, or what came within 5 s), reading everything else.
std::vector<Received> results_of(Workers& w, uint32_t job_id, size_t count) {
  std::vector<Received> out;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (out.size() < count && std::chrono::steady_clock::now() < until) {
    for (auto& r : w.receive(512, std::chrono::milliseconds(20))) {
      if (r.hdr.job_id == job_id) out.push_back(std::move(r));
    }
  }
  return out;
}

// One push of `job` from `rank` for chunk `chunk` (its first segment), signed with the job's secret if it
// has one, built as a frame for the UDP port of lcore `port_lcore`.
std::vector<std::byte> push_frame(const Workers& w, const config::Job& job, uint16_t rank, uint32_t chunk,
                                  uint32_t round, uint16_t port_lcore, float value) {
  proto::Header h;
  h.opcode = proto::Opcode::push;
  h.job_id = job.id;
  h.rank = rank;
  h.chunk_id = chunk;
  h.round = round;
  h.elem_count = 352;
  const auto payload = encode(std::vector<float>(352, value), Dtype::fp32);
  std::vector<std::byte> frame(proto::kFrameHeadersBytes + payload.size());
  EXPECT_TRUE(proto::build_phub_frame(w.addrs(rank, static_cast<uint16_t>(job.port_base + port_lcore)), h, payload, frame));
  if (!job.secret.empty()) {
    proto::sign_header(proto::derive_key(job.secret, job.id),
                       std::span(frame).subspan(proto::kFrameHeadersBytes - proto::kHeaderBytes).first<proto::kHeaderBytes>());
    proto::refresh_udp_checksum(frame);
  }
  return frame;
}

TEST(Shares, SplitTheSlotsByWorkersAndNeverAddUpToMoreThanTheWhole) {
  EXPECT_EQ(engine::job_share_slots(63, 1, 62), 1u);
  EXPECT_EQ(engine::job_share_slots(63, 61, 62), 61u);
  EXPECT_EQ(engine::job_share_slots(2048, 2, 4), 1024u);
  EXPECT_EQ(engine::job_share_slots(2048, 5, 5), 2048u);
  EXPECT_EQ(engine::job_share_slots(100, 1, 1000), 1u) << "a job always gets a slot";
  uint64_t sum = 0;
  for (uint32_t w : {3u, 7u, 11u, 13u}) sum += engine::job_share_slots(4095, w, 34);
  EXPECT_LE(sum, 4095u);
  EXPECT_EQ(engine::handoff_ring_slots(64), 63u);
}

TEST(Shares, ATransmitGuaranteeIsAlwaysAdmittedAndBorrowingStopsAtThePoolOrTheJobsLimit) {
  using engine::TxAdmit;
  using engine::TxHold;
  EXPECT_EQ(engine::tx_pool_slots(2048), 1024u);
  EXPECT_EQ(engine::tx_borrow_limit_slots(2048), 512u);
  EXPECT_EQ(engine::tx_guarantee_slots(2048, 1, 16), 64u) << "a share of the half that is not the pool";
  EXPECT_EQ(engine::admit_tx(TxHold{63, 0}, 64, 1024, 1024, 512), TxAdmit::own) << "the guarantee, pool empty or not";
  EXPECT_EQ(engine::admit_tx(TxHold{64, 0}, 64, 0, 1024, 512), TxAdmit::borrowed);
  EXPECT_EQ(engine::admit_tx(TxHold{575, 511}, 64, 1023, 1024, 512), TxAdmit::borrowed);
  EXPECT_EQ(engine::admit_tx(TxHold{64, 0}, 64, 1024, 1024, 512), TxAdmit::refused) << "the pool is lent out";
  EXPECT_EQ(engine::admit_tx(TxHold{576, 512}, 64, 512, 1024, 512), TxAdmit::refused) << "the job's limit";
  EXPECT_EQ(engine::admit_tx(TxHold{30, 30}, 64, 1024, 1024, 512), TxAdmit::own)
      << "borrowed packets still waiting do not use up the guarantee's admission";
  // Every job at its guarantee plus the pool never exceeds the buffer.
  uint64_t guaranteed = 0;
  for (uint32_t w : {1u, 15u, 3u, 64u}) guaranteed += engine::tx_guarantee_slots(2048, w, 83);
  EXPECT_LE(guaranteed + engine::tx_pool_slots(2048), 2048u);
}

// Job A (2 workers) floods rank 0's push with valid headers (its own secret, or none) into lcore 0's queue
// for a chunk lcore 1 owns: every frame goes through the hand-off ring, where A holds at most 2 of the 63
// slots (B, 61 workers, holds up to 61). The round never completes, so A's copies are duplicates: no answer. B's 61 ranks push their round on the same queue, between A's frames,
// at the rate the test can send. The frames are queued before the engine starts, so lcore 0 takes them
// in full bursts, faster than lcore 1 empties the ring.
void flood_the_ring(bool with_secret) {
  RingLink link{2};
  auto a = make_job(1, 2, {352 * 2});
  a.chunk_bytes = 352 * 4;  // two chunks: lcore 0 owns one, lcore 1 the other
  if (with_secret) a.secret = "alpha-secret-of-16+";
  auto b = make_job(2, 61, {352 * 2});
  b.chunk_bytes = 352 * 4;
  auto cfg = make_config(link.server_name(), 2, {a, b});
  cfg.limits.ring_entries = 64;
  auto e = engine::Engine::create(cfg);
  ASSERT_TRUE(e) << e.error();
  auto& engine = *e;
  Workers w(link.worker_name(), 2, *engine);
  const auto& la = w.layout(a, 2);
  const auto& lb = w.layout(b, 2);
  const uint32_t chunk_a = la.chunk(0).owner == 1 ? 0 : 1;
  const uint32_t chunk_b = lb.chunk(0).owner == 1 ? 0 : 1;

  constexpr int kFlood = 3000;  // below the 4096 frames the link's queue holds before the engine runs
  int sent_b = 0;
  for (int i = 0; i < kFlood; ++i) {
    w.send_frame(push_frame(w, a, 0, chunk_a, 0, 1, 1.0f), 0);
    if (i % 40 == 20 && sent_b < b.workers) {
      const auto rank = static_cast<uint16_t>(sent_b++);
      w.send_frame(push_frame(w, b, rank, chunk_b, 0, 1, 1.0f + rank), 0);
    }
  }
  ASSERT_EQ(sent_b, 61);
  ASSERT_TRUE(engine->start());

  const auto got = results_of(w, b.id, 61);
  ASSERT_EQ(got.size(), 61u) << "B's round completed through the ring";
  for (const auto& r : got) {
    EXPECT_EQ(r.hdr.opcode, proto::Opcode::result);
    EXPECT_EQ(decode(r.payload, Dtype::fp32)[5], 61.0f + 61.0f * 60.0f / 2.0f);  // sum of 1 + rank
  }
  // Every frame of A either took one of A's slots or was dropped against A.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  auto accounted = [&] {
    return engine->totals().lcores.redirected_in + job_drops(*engine, 0, Drop::handoff_share_full);
  };
  while (accounted() < kFlood + 61u && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(accounted(), kFlood + 61u);
  const auto t = engine->totals();
  EXPECT_GT(job_drops(*engine, 0, Drop::handoff_share_full), 0u) << "A's flood went past its two slots";
  EXPECT_EQ(all_job_drops(*engine, 1), 0u) << "nothing of B dropped";
  EXPECT_EQ(job_counters(*engine, 1).rounds_completed, 1u);
  EXPECT_EQ(t.lcores.drops[static_cast<size_t>(Drop::ring_full)], 0u) << "the shares never fill the ring";
  EXPECT_EQ(job_counters(*engine, 0).pushes, 1u) << "A's first push counted, the rest are duplicates";
  engine->stop();
}

TEST(Shares, AFloodThroughTheHandOffRingIsDroppedAgainstItsJobAlone) { flood_the_ring(true); }
TEST(Shares, AFloodOfAnInsecureJobThroughTheHandOffRingIsDroppedAgainstItsJobAlone) { flood_the_ring(false); }

// `count` pushes of job `a` (index 0) from rank 0 for a round far ahead, each answered with an error, and
// wait until the server took them all.
void flood_with_answered_pushes(Workers& w, const engine::Engine& engine, const config::Job& a, uint64_t count) {
  for (uint64_t i = 0; i < count; ++i) w.send_frame(push_frame(w, a, 0, 0, 1000, 0, 1.0f), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (job_drops(engine, 0, Drop::round_ahead) < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(job_drops(engine, 0, Drop::round_ahead), count);
}

// Job A's pushes for a round far ahead are each answered with an error. The workers' side reads nothing,
// so the link's queue (4095 frames) fills, then the lcore's transmit buffer: A may hold its guarantee of
// 512 (half of the 1024 slots outside the pool) and borrow 512 of the pool. B's round then completes and
// its results wait in B's guarantee until the workers read.
TEST(Shares, AFloodOfAnsweredPushesFillsOnlyItsJobsTransmitShare) {
  auto a = make_job(1, 2, {352});
  a.secret = "alpha-secret-of-16+";
  auto b = make_job(2, 2, {352});
  b.secret = "beta-secret-of-16+-";
  StartedEngine s(1, {a, b});
  auto& engine = s.engine;
  Workers& w = *s.workers;

  constexpr uint64_t kFlood = 4095 + 1024 + 600;
  ASSERT_NO_FATAL_FAILURE(flood_with_answered_pushes(w, *engine, a, kFlood));
  EXPECT_GE(job_drops(*engine, 0, Drop::tx_share_full), kFlood - 4096 - 1024) << "A's answers past its share";

  w.send_frame(push_frame(w, b, 0, 0, 0, 0, 2.0f), 0);
  w.send_frame(push_frame(w, b, 1, 0, 0, 0, 3.0f), 0);
  const auto results = results_of(w, b.id, 2);
  ASSERT_EQ(results.size(), 2u) << "B's results found room";
  for (const auto& r : results) EXPECT_EQ(decode(r.payload, Dtype::fp32)[0], 5.0f);
  EXPECT_EQ(all_job_drops(*engine, 1), 0u) << "nothing of B dropped";
  EXPECT_EQ(engine->totals().lcores.drops[static_cast<size_t>(Drop::tx_full)], 0u);
}

// A job's burst may be far larger than its guarantee: 1 worker of 16 is guaranteed 64 slots. While job A's
// flood holds its guarantee and all it may borrow, B's 300 results, completed at once, borrow from what is
// left of the pool and all reach the worker (with the slots split by workers alone, B could hold 128).
TEST(Shares, AJobsBurstBeyondItsGuaranteeBorrowsFromThePoolBesideAFlood) {
  auto a = make_job(1, 15, {352});
  a.secret = "alpha-secret-of-16+";
  constexpr uint32_t kBurst = 300;
  auto b = make_job(2, 1, std::vector<uint64_t>(kBurst, 352));
  b.secret = "beta-secret-of-16+-";
  StartedEngine s(1, {a, b});
  auto& engine = s.engine;
  Workers& w = *s.workers;
  ASSERT_EQ(w.layout(b, 1).chunks().size(), kBurst);
  w.prove(b, 0);

  constexpr uint64_t kFlood = 4095 + 960 + 512 + 600;
  ASSERT_NO_FATAL_FAILURE(flood_with_answered_pushes(w, *engine, a, kFlood));
  EXPECT_GE(job_drops(*engine, 0, Drop::tx_share_full), 600u) << "A's answers past its guarantee and limit";

  for (uint32_t c = 0; c < kBurst; ++c) w.send_frame(push_frame(w, b, 0, c, 0, 0, 2.0f), 0);
  const auto results = results_of(w, b.id, kBurst);
  ASSERT_EQ(results.size(), kBurst) << "B's burst found room";
  for (const auto& r : results) EXPECT_EQ(decode(r.payload, Dtype::fp32)[0], 2.0f);
  EXPECT_EQ(all_job_drops(*engine, 1), 0u) << "nothing of B dropped";
  EXPECT_EQ(engine->totals().lcores.drops[static_cast<size_t>(Drop::tx_full)], 0u);
}

}  // namespace
}  // namespace phub::test
