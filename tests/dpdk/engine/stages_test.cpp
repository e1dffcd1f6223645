// The server's own cycles per push by stage (lcore counters stage_*, tx_burst_tsc): a job-key job's rounds
// leave timed pushes with cycles in every stage, the seal included, and transmit bursts with cycles.
#include <gtest/gtest.h>

#include "harness.hpp"

namespace phub::test {
namespace {

TEST(Stages, PushesAreTimedByStage) {
  config::Job j = make_job(1, 3, {30000});
  j.secret = "stage-test-secret-0123456789";
  j.sessions = false;
  j.insecure = true;  // the job key's tags: results are signed (the seal stage)
  StartedEngine s(1, {j});
  const auto& job = s.cfg.jobs[0];
  const auto& l = s.layout(0);
  for (uint16_t r = 0; r < 3; ++r) s.workers->prove(job, r);
  size_t pushes = 0;
  for (uint32_t round = 0; round < 2; ++round) {
    size_t segments = 0;
    for (uint32_t c = 0; c < l.chunk_count(); ++c) {
      for (uint32_t seg = 0; seg < l.chunk(c).segments; ++seg, ++segments) {
        for (uint16_t r = 0; r < 3; ++r, ++pushes) {
          const uint32_t off = l.segment_offset(seg);
          std::vector<float> v(l.segment_count_elems(l.chunk(c), seg));
          for (uint32_t i = 0; i < v.size(); ++i) v[i] = gradient(r, round, c, off + i);
          s.workers->send(job, r, push_header(l, c, seg, round, r, job.dtype), encode(v, job.dtype));
        }
      }
    }
    ASSERT_EQ(s.workers->receive(3 * segments).size(), 3 * segments);
  }
  const engine::LcoreCounters c = s.engine->totals().lcores;
  // One frame in 61 is timed, and counted when it is a push: of `pushes` pushes (and a few joins), at least
  // pushes / 61 - 2 (the joins may take the timed turns at the start).
  EXPECT_GE(c.stage_samples, pushes / 61 - 2) << pushes << " pushes";
  EXPECT_LE(c.stage_samples, pushes / 61 + 1);
  EXPECT_GT(c.stage_parse_tsc, 0u);
  EXPECT_GT(c.stage_gate_tsc, 0u);
  EXPECT_GT(c.stage_sum_tsc, 0u);
  EXPECT_GT(c.tx_burst_tsc, 0u);
  EXPECT_GT(c.tx_packets, 0u);
  // Every third push completes a segment and signs its three results. The timed frames are 61 apart, and 61
  // is 1 modulo 3: they land on each rank's pushes in turn, so every third one seals.
  ASSERT_GE(c.stage_samples, 3u);
  EXPECT_GT(c.stage_seal_tsc, 0u);
  // The stages are parts of the busy loop iterations.
  EXPECT_LT(c.stage_parse_tsc + c.stage_gate_tsc + c.stage_sum_tsc + c.stage_seal_tsc, c.busy_tsc);
}

}  // namespace
}  // namespace phub::test
