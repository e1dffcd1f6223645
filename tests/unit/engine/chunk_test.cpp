// Tests of one chunk's round logic: accumulation, duplicates, completion, rounds, ps init and steps,
// deterministic order, modular rounds. Runs without an EAL (result buffers are plain memory).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "phub/engine/chunk.hpp"

namespace phub::engine {
namespace {

struct TestChunk {
  JobMath m;
  Chunk c;
  std::vector<std::byte> arena;
  std::vector<std::byte> out0, out1;

  TestChunk(uint16_t workers, uint32_t elems, uint32_t seg_elems, Dtype d = Dtype::fp32, bool ps = false,
            bool deterministic = false, bool mean = false) {
    m.kernels = &agg::kernels_for(agg::Isa::scalar);
    m.workers = workers;
    m.bitmap_words = static_cast<uint16_t>((workers + 63) / 64);
    m.in_dtype = m.out_dtype = d;
    m.ps = ps;
    m.mean = mean;
    m.deterministic = deterministic;
    m.segment_elems = seg_elems;
    c.elems = elems;
    c.segments = (elems + seg_elems - 1) / seg_elems;
    const ChunkSizes s = chunk_sizes(m, elems, c.segments);
    arena.assign(s.arena_total() + 64, std::byte{0});
    auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(arena.data()) + 63) & ~uintptr_t{63});
    EXPECT_EQ(carve_chunk(m, c, base), s.arena_total());
    out0.assign(s.result, std::byte{0});
    out1.assign(s.result, std::byte{0});
    c.out[0] = out0.data();
    c.out[1] = out1.data();
  }

  std::vector<float> seg_payload(uint16_t rank, uint32_t round, uint32_t seg) const {
    std::vector<float> v(segment_elems(m, c, seg));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((rank * 7 + round * 3 + seg * 5 + i) % 17) - 8;
    return v;
  }

  PushResult push(uint16_t rank, uint32_t round, uint32_t seg) {
    auto v = seg_payload(rank, round, seg);
    return contribute(m, c, rank, round, seg, reinterpret_cast<const std::byte*>(v.data()), 1000);
  }

  float out(int buf, uint32_t i) const {
    float f;
    std::memcpy(&f, (buf == 0 ? out0 : out1).data() + i * 4, 4);
    return f;
  }
};

TEST(Chunk, SumsEveryRankAndCompletesEachSegment) {
  TestChunk t(4, 1000, 352);
  ASSERT_EQ(t.c.segments, 3u);
  for (uint32_t seg = 0; seg < 3; ++seg) {
    for (uint16_t r = 0; r < 4; ++r) {
      const PushResult res = t.push(r, 0, seg);
      EXPECT_EQ(res, r == 3 ? PushResult::segment_complete : PushResult::accepted);
    }
    EXPECT_TRUE(segment_done(t.m, t.c, seg));
  }
  ASSERT_TRUE(round_complete(t.c));
  for (uint32_t seg = 0; seg < 3; ++seg) {
    for (uint32_t i = 0; i < segment_elems(t.m, t.c, seg); ++i) {
      float expect = 0;
      for (uint16_t r = 0; r < 4; ++r) expect += t.seg_payload(r, 0, seg)[i];
      ASSERT_EQ(t.out(t.c.cur, segment_offset(t.m, seg) + i), expect) << seg << "/" << i;
    }
  }
}

TEST(Chunk, DuplicatesAreIgnoredAndCompleteOnesAnswered) {
  TestChunk t(2, 352, 352);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::accepted);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::duplicate);
  EXPECT_EQ(t.c.counts[0], 1);
  EXPECT_EQ(t.push(1, 0, 0), PushResult::segment_complete);
  EXPECT_EQ(t.push(1, 0, 0), PushResult::duplicate_complete);
  const float first = t.out(t.c.cur, 0);
  EXPECT_EQ(first, t.seg_payload(0, 0, 0)[0] + t.seg_payload(1, 0, 0)[0]);
}

TEST(Chunk, RoundsAdvanceAndThePreviousResultIsKept) {
  TestChunk t(2, 100, 352);
  EXPECT_EQ(t.push(1, 1, 0), PushResult::ahead);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::accepted);
  EXPECT_EQ(t.push(1, 0, 0), PushResult::segment_complete);
  const float r0 = t.out(t.c.cur, 7);
  advance_round(t.m, t.c);
  EXPECT_EQ(t.c.round, 1u);
  EXPECT_TRUE(t.c.has_prev);
  EXPECT_EQ(t.out(t.c.cur ^ 1, 7), r0);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::previous_round);
  EXPECT_EQ(t.push(0, 1, 0), PushResult::accepted);
  EXPECT_EQ(t.push(1, 1, 0), PushResult::segment_complete);
  advance_round(t.m, t.c);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::behind);
  EXPECT_EQ(t.out(t.c.cur ^ 1, 7), t.seg_payload(0, 1, 0)[7] + t.seg_payload(1, 1, 0)[7]);
}

TEST(Chunk, RoundModulusWraps) {
  TestChunk t(1, 16, 352);
  t.m.round_modulus = 3;
  EXPECT_EQ(t.push(0, 3, 0), PushResult::bad_round);
  for (uint32_t k = 0; k < 7; ++k) {
    const uint32_t r = k % 3;
    ASSERT_EQ(t.push(0, r, 0), PushResult::segment_complete) << k;
    advance_round(t.m, t.c);
    EXPECT_EQ(t.c.round, (r + 1) % 3);
    EXPECT_EQ(t.push(0, r, 0), PushResult::previous_round);
  }
  EXPECT_EQ(round_delta(t.m, 0, 2), 1);
  EXPECT_EQ(round_delta(t.m, 2, 0), -1);
}

TEST(Chunk, MeanDividesByWorkers) {
  TestChunk t(4, 10, 352, Dtype::fp32, false, false, true);
  for (uint16_t r = 0; r < 4; ++r) (void)t.push(r, 0, 0);
  float sum = 0;
  for (uint16_t r = 0; r < 4; ++r) sum += t.seg_payload(r, 0, 0)[3];
  EXPECT_EQ(t.out(t.c.cur, 3), sum * 0.25f);
}

TEST(Chunk, DeterministicModeIsIndependentOfArrivalOrder) {
  // Values whose fp32 sum depends on the order of addition.
  const uint16_t W = 8;
  std::vector<std::vector<float>> data(W, std::vector<float>(64));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (auto& v : data) {
    for (auto& x : v) x = dist(rng) * std::pow(10.0f, static_cast<float>(rng() % 7) - 3);
  }
  std::vector<float> reference;
  for (int trial = 0; trial < 20; ++trial) {
    TestChunk t(W, 64, 352, Dtype::fp32, false, true);
    std::vector<uint16_t> order(W);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (uint16_t r : order) {
      (void)contribute(t.m, t.c, r, 0, 0, reinterpret_cast<const std::byte*>(data[r].data()), 1);
    }
    ASSERT_TRUE(round_complete(t.c));
    std::vector<float> got(64);
    std::memcpy(got.data(), t.c.out[t.c.cur], 64 * 4);
    if (reference.empty()) {
      reference = got;
      for (size_t i = 0; i < 64; ++i) {
        float s = 0;
        for (uint16_t r = 0; r < W; ++r) s += data[r][i];
        EXPECT_EQ(got[i], s) << "rank order sum, element " << i;
      }
    }
    EXPECT_EQ(std::memcmp(got.data(), reference.data(), 64 * 4), 0) << "trial " << trial;
  }
}

TEST(Chunk, PsNeedsInitThenAppliesSgd) {
  TestChunk t(2, 20, 352, Dtype::fp32, true);
  t.m.optimizer.kind = agg::OptimizerKind::sgd;
  t.m.optimizer.lr = 0.5f;
  EXPECT_EQ(t.push(0, 0, 0), PushResult::not_initialized);
  std::vector<float> w0(20, 1.0f);
  EXPECT_EQ(init_segment(t.m, t.c, 0, reinterpret_cast<const std::byte*>(w0.data()), Dtype::fp32),
            InitResult::chunk_initialized);
  EXPECT_TRUE(t.c.has_prev);
  EXPECT_EQ(t.out(t.c.cur ^ 1, 5), 1.0f);
  EXPECT_EQ(t.push(0, 0, 0), PushResult::accepted);
  EXPECT_EQ(t.push(1, 0, 0), PushResult::segment_complete);
  const float g = t.seg_payload(0, 0, 0)[5] + t.seg_payload(1, 0, 0)[5];
  EXPECT_EQ(t.out(t.c.cur, 5), 1.0f - 0.5f * g);
  advance_round(t.m, t.c);
  EXPECT_EQ(t.c.step, 1u);
  EXPECT_EQ(init_segment(t.m, t.c, 0, reinterpret_cast<const std::byte*>(w0.data()), Dtype::fp32),
            InitResult::too_late);
}

TEST(Chunk, Bf16PushesWidenAndNarrow) {
  TestChunk t(3, 40, 352, Dtype::bf16);
  std::vector<uint16_t> v(40);
  for (uint16_t r = 0; r < 3; ++r) {
    for (size_t i = 0; i < v.size(); ++i) {
      const float f = static_cast<float>(r + i % 5);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      v[i] = static_cast<uint16_t>(bits >> 16);  // exact: small integers
    }
    (void)contribute(t.m, t.c, r, 0, 0, reinterpret_cast<const std::byte*>(v.data()), 1);
  }
  ASSERT_TRUE(round_complete(t.c));
  for (size_t i = 0; i < 40; ++i) {
    uint16_t out;
    std::memcpy(&out, t.c.out[t.c.cur] + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(out) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(f, static_cast<float>(0 + 1 + 2 + 3 * (i % 5))) << i;  // sum over ranks 0..2 of (rank + i % 5)
  }
}

TEST(Chunk, FirstMissingRankNamesAStraggler) {
  TestChunk t(70, 10, 352);
  for (uint16_t r = 0; r < 70; ++r) {
    if (r != 65) (void)t.push(r, 0, 0);
  }
  EXPECT_EQ(first_missing_rank(t.m, t.c), 65);
  EXPECT_TRUE(contributed(t.m, t.c, 0, 64));
  EXPECT_FALSE(contributed(t.m, t.c, 0, 65));
}

}  // namespace
}  // namespace phub::engine
