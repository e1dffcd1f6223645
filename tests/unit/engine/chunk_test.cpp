// Tests of one chunk's round logic: accumulation, duplicates, completion, rounds, ps init and steps,
// deterministic order, modular rounds. Runs without an EAL (result buffers are plain memory).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "phub/engine/chunk.hpp"
#include "phub/proto/header.hpp"

namespace phub::engine {
namespace {

// Carves `c` (elems and segments set) from `arena` and points its result buffers at out0 and out1.
void carve(const JobMath& m, Chunk& c, bool homed, std::vector<std::byte>& arena, std::vector<std::byte>& out0,
           std::vector<std::byte>& out1) {
  const ChunkSizes s = chunk_sizes(m, c.elems, c.segments, homed);
  arena.assign(s.arena_total() + 64, std::byte{0});
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(arena.data()) + 63) & ~uintptr_t{63});
  EXPECT_EQ(carve_chunk(m, c, base), s.arena_total());
  out0.assign(s.result, std::byte{0});
  out1.assign(s.result, std::byte{0});
  c.out[0] = out0.data();
  c.out[1] = out1.data();
}

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
    carve(m, c, false, arena, out0, out1);
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

// A ps round's settings (docs/protocol.md, "Hyperparameters"): the first push's hyperparameter set applies, a
// push that names another is refused and not counted, a declared non-finite round updates nothing.
struct PsRound : TestChunk {
  HparamsTable sets;
  PsRound() : TestChunk(2, 20, 352, Dtype::fp32, true) {
    m.optimizer.kind = agg::OptimizerKind::sgd;
    m.optimizer.lr = 0.5;
    std::vector<float> w0(20, 1.0f);
    EXPECT_EQ(init_segment(m, c, 0, reinterpret_cast<const std::byte*>(w0.data()), Dtype::fp32),
              InitResult::chunk_initialized);
  }
  PushResult push_with(uint16_t rank, uint64_t id, bool nonfinite = false) {
    auto v = seg_payload(rank, c.round, 0);
    return contribute(m, c, rank, c.round, 0, reinterpret_cast<const std::byte*>(v.data()), 1000,
                      RoundIntent{id, &sets, nonfinite});
  }
  float grad_sum(uint32_t i) const { return seg_payload(0, c.round, 0)[i] + seg_payload(1, c.round, 0)[i]; }
};

TEST(Chunk, PsRoundAppliesItsHyperparameterSetNotTheConfigured) {
  PsRound t;
  agg::OptimizerParams p = t.m.optimizer;
  p.lr = 0.125;
  t.sets.put(77, p, proto::HparamsWire{});
  const float g = t.grad_sum(3);
  EXPECT_EQ(t.push_with(0, 77), PushResult::accepted);
  EXPECT_EQ(t.push_with(1, 77), PushResult::segment_complete);
  EXPECT_EQ(t.out(t.c.cur, 3), 1.0f - 0.125f * g);  // the set's lr, not the configured 0.5
  advance_round(t.m, t.c);
  EXPECT_EQ(t.c.step, 1u);
}

TEST(Chunk, PsRoundRefusesAnotherSetAndAnUnknownOne) {
  PsRound t;
  t.sets.put(77, t.m.optimizer, proto::HparamsWire{});
  t.sets.put(78, t.m.optimizer, proto::HparamsWire{});
  EXPECT_EQ(t.push_with(0, 99), PushResult::hparams_unknown);  // not held: not counted
  EXPECT_FALSE(contributed(t.m, t.c, 0, 0));
  EXPECT_EQ(t.push_with(0, 77), PushResult::accepted);
  EXPECT_EQ(t.push_with(1, 78), PushResult::hparams_mismatch);  // never averaged: not counted
  EXPECT_EQ(t.push_with(1, 0), PushResult::hparams_mismatch);   // nor the configured optimizer instead
  EXPECT_FALSE(contributed(t.m, t.c, 0, 1));
  EXPECT_EQ(t.push_with(1, 77), PushResult::segment_complete);
}

TEST(Chunk, PsDeclaredNonfiniteRoundChangesNothing) {
  PsRound t;
  EXPECT_EQ(t.push_with(0, 0), PushResult::accepted);
  EXPECT_EQ(t.push_with(1, 0, /*nonfinite=*/true), PushResult::segment_complete);
  EXPECT_EQ(t.out(t.c.cur, 3), 1.0f);  // the weights as they were
  EXPECT_TRUE(result_skipped(t.c, t.c.cur));
  advance_round(t.m, t.c);
  EXPECT_EQ(t.c.step, 0u);  // no update: Adam's bias correction and the momentum start stay
  EXPECT_FALSE(t.c.trained);
  EXPECT_TRUE(result_skipped(t.c, t.c.cur ^ 1));  // the kept previous result says so too
  EXPECT_EQ(t.push_with(0, 0), PushResult::accepted);
  EXPECT_EQ(t.push_with(1, 0), PushResult::segment_complete);
  EXPECT_FALSE(result_skipped(t.c, t.c.cur));
  EXPECT_EQ(t.out(t.c.cur, 3), 1.0f - 0.5f * t.grad_sum(3));
  advance_round(t.m, t.c);
  EXPECT_EQ(t.c.step, 1u);
}

TEST(Chunk, PsStateInitSetsMomentsAndStepUntilTheFirstUpdate) {
  TestChunk a(1, 20, 352, Dtype::fp32, true);  // (re-carved with the moments the kind needs)
  a.m.optimizer.kind = agg::OptimizerKind::adam;
  carve(a.m, a.c, false, a.arena, a.out0, a.out1);
  std::vector<float> m1(20, 0.25f), w0(20, 1.0f);
  const auto* bytes = reinterpret_cast<const std::byte*>(m1.data());
  EXPECT_EQ(init_state(a.m, a.c, static_cast<uint8_t>(proto::StateArray::moment1), 0, 20, bytes, 42),
            InitResult::accepted);
  EXPECT_EQ(init_state(a.m, a.c, static_cast<uint8_t>(proto::StateArray::moment1), 10, 11, bytes, 42),
            InitResult::bad_request);  // past the chunk
  EXPECT_EQ(init_state(a.m, a.c, 7, 0, 20, bytes, 42), InitResult::bad_request);
  EXPECT_EQ(a.c.step, 42u);
  // The weights' init keeps the moments the state set.
  EXPECT_EQ(init_segment(a.m, a.c, 0, reinterpret_cast<const std::byte*>(w0.data()), Dtype::fp32),
            InitResult::chunk_initialized);
  EXPECT_EQ(state_array(a.c, static_cast<uint8_t>(proto::StateArray::moment1))[5], 0.25f);
  EXPECT_EQ(a.push(0, 0, 0), PushResult::segment_complete);
  advance_round(a.m, a.c);
  EXPECT_EQ(a.c.step, 43u);
  EXPECT_EQ(init_state(a.m, a.c, static_cast<uint8_t>(proto::StateArray::moment2), 0, 20, bytes, 1),
            InitResult::too_late);
  // Plain SGD keeps no moments.
  TestChunk s(1, 20, 352, Dtype::fp32, true);
  EXPECT_EQ(init_state(s.m, s.c, static_cast<uint8_t>(proto::StateArray::moment1), 0, 20, bytes, 1),
            InitResult::bad_request);
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

// The two levels of a hierarchical deterministic sum (docs/hierarchy.md): each rack's ranks in increasing
// order, then the racks' partials in rack order, against a scalar model of that order, bit for bit, on
// every ISA the CPU has.
struct Racked {
  std::vector<std::vector<uint16_t>> racks;                  // ranks of each rack, increasing
  std::vector<std::vector<float>> x;                         // x[rank][i]: what each rank pushed
};

// Stage every rank's payload of segment 0 through contribute (deterministic mode), as a hub would.
void stage(TestChunk& t, const Racked& r, Dtype d) {
  for (uint16_t rank = 0; rank < t.m.workers; ++rank) {
    std::vector<std::byte> wire(r.x[rank].size() * dtype_bytes(d));
    for (size_t i = 0; i < r.x[rank].size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &r.x[rank][i], 4);
      if (d == Dtype::fp32) {
        std::memcpy(wire.data() + 4 * i, &bits, 4);
      } else {  // bf16: the model's values are already exact in bf16 (low half zero)
        const auto half = static_cast<uint16_t>(bits >> 16);
        std::memcpy(wire.data() + 2 * i, &half, 2);
      }
    }
    (void)contribute(t.m, t.c, rank, 0, 0, wire.data(), 1000);
  }
}

std::vector<float> model(const Racked& r, uint32_t n) {
  std::vector<float> total(n);
  for (uint32_t i = 0; i < n; ++i) {
    float t = 0;
    for (size_t k = 0; k < r.racks.size(); ++k) {
      float p = 0;
      for (size_t j = 0; j < r.racks[k].size(); ++j) p = j == 0 ? r.x[r.racks[k][j]][i] : p + r.x[r.racks[k][j]][i];
      t = k == 0 ? p : t + p;
    }
    total[i] = t;
  }
  return total;
}

std::vector<float> two_levels(const TestChunk& t, const Racked& r, const agg::Kernels& k, uint32_t n) {
  std::vector<std::vector<float>> partials(r.racks.size(), std::vector<float>(n));
  std::vector<const float*> ptrs;
  for (size_t i = 0; i < r.racks.size(); ++i) {
    rack_partial(t.m, t.c, r.racks[i], 0, n, partials[i].data());
    ptrs.push_back(partials[i].data());
  }
  std::vector<float> total(n);
  sum_partials(k, ptrs, n, total.data());
  return total;
}

Racked random_racks(uint16_t workers, uint16_t racks, uint32_t n, std::mt19937& rng, bool bf16) {
  Racked r;
  r.racks.resize(racks);
  for (uint16_t rank = 0; rank < workers; ++rank) r.racks[rng() % racks].push_back(rank);  // increasing per rack
  std::normal_distribution<float> value(0.0f, 1000.0f);
  r.x.assign(workers, std::vector<float>(n));
  for (auto& v : r.x) {
    for (float& f : v) {
      f = value(rng);
      if (bf16) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        bits &= 0xffff0000u;
        std::memcpy(&f, &bits, 4);
      }
    }
  }
  return r;
}

TEST(HierarchySum, RanksInOrderThenRacksInOrderBitForBitOnEveryIsa) {
  std::mt19937 rng(15);
  for (Dtype d : {Dtype::fp32, Dtype::bf16}) {
    for (auto [workers, racks] : {std::pair<uint16_t, uint16_t>{7, 3}, {150, 2}, {5, 5}, {9, 70}}) {
      const uint32_t n = 333;  // not a multiple of any vector width
      TestChunk t(workers, n, n, d, false, true);
      const Racked r = random_racks(workers, racks, n, rng, d == Dtype::bf16);
      stage(t, r, d);
      const auto want = model(r, n);
      for (agg::Isa isa : agg::kAllIsas) {
        if (!agg::isa_supported(isa)) continue;
        t.m.kernels = &agg::kernels_for(isa);
        const auto got = two_levels(t, r, *t.m.kernels, n);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), n * 4), 0)
            << dtype_name(d) << " " << workers << " ranks in " << racks << " racks, isa " << t.m.kernels->name;
      }
    }
  }
}

// Racks of consecutive ranks in rack order and exact sums: the hierarchy equals a flat deterministic server.
TEST(HierarchySum, EqualsFlatWhenTheSumsAreExact) {
  TestChunk t(6, 352, 352, Dtype::fp32, false, true);
  Racked r;
  r.racks = {{0, 1}, {2, 3, 4}, {5}};
  r.x.assign(6, std::vector<float>(352));
  for (uint16_t rank = 0; rank < 6; ++rank) {
    for (uint32_t i = 0; i < 352; ++i) r.x[rank][i] = static_cast<float>((rank * 7 + i) % 19) - 9;
  }
  stage(t, r, Dtype::fp32);
  ASSERT_TRUE(segment_done(t.m, t.c, 0));
  const auto got = two_levels(t, r, *t.m.kernels, 352);
  for (uint32_t i = 0; i < 352; ++i) ASSERT_EQ(got[i], t.out(t.c.cur, i)) << i;
}

// fp32 addition is not associative: two racks of two can differ from the flat order, as documented.
TEST(HierarchySum, TheOrderIsDefinedBecauseItMatters) {
  TestChunk t(4, 16, 16, Dtype::fp32, false, true);
  Racked r;
  r.racks = {{0, 1}, {2, 3}};
  r.x = {std::vector<float>(16, 1e8f), std::vector<float>(16, 1.0f), std::vector<float>(16, -1e8f),
         std::vector<float>(16, 1.0f)};
  stage(t, r, Dtype::fp32);
  const auto got = two_levels(t, r, *t.m.kernels, 16);
  EXPECT_EQ(got[0], 0.0f);            // (1e8 + 1) + (-1e8 + 1): each partial rounds the 1 away
  EXPECT_EQ(t.out(t.c.cur, 0), 1.0f);  // ((1e8 + 1) - 1e8) + 1, the flat order
}


// A chunk of a hierarchical job: two racks, rack 0 holds ranks {0, 2}, rack 1 ranks {1, 3}; one segment of
// 32 fp32 elements that travels as two pieces of 16. `home` is the chunk's home rack, `self` this hub's.
struct HubChunk {
  std::vector<uint16_t> local;
  std::vector<uint16_t> rack_of = {0, 1, 0, 1};
  JobMath m;
  Chunk c;
  std::vector<std::byte> arena, out0, out1;

  // adam_ps: a ps job with Adam (the optimizer state a home keeps).
  HubChunk(uint16_t self, uint16_t home, bool deterministic, bool adam_ps = false) {
    for (uint16_t r = 0; r < 4; ++r) {
      if (rack_of[r] == self) local.push_back(r);
    }
    m.kernels = &agg::kernels_for(agg::Isa::scalar);
    m.workers = 4;
    m.segment_elems = 32;
    m.deterministic = deterministic;
    m.ps = adam_ps;
    if (adam_ps) m.optimizer.kind = agg::OptimizerKind::adam;
    m.hub.racks = 2;
    m.hub.my_rack = self;
    m.hub.local_ranks = local;
    m.hub.rack_of_rank = rack_of;
    m.hub.piece_elems = 16;
    m.hub.pieces_per_segment = 2;
    m.hub.piece_words = 1;
    c.elems = 32;
    c.segments = 1;
    c.home = home;
    carve(m, c, home == self, arena, out0, out1);
  }
  static std::vector<float> values(uint16_t who, uint32_t n) {
    std::vector<float> v(n);
    for (uint32_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(who + 1) + 0.37f * static_cast<float>(i);
    return v;
  }
  PushResult push(uint16_t rank, uint32_t round = 0) {
    const auto v = values(rank, 32);
    return contribute(m, c, rank, round, 0, reinterpret_cast<const std::byte*>(v.data()), 1000);
  }
  PushResult partial(uint16_t rack, uint16_t piece, const std::vector<float>& whole, uint32_t round = 0) {
    return contribute_partial(m, c, rack, round, 0, piece, reinterpret_cast<const std::byte*>(whole.data() + 16 * piece),
                              1000);
  }
  [[nodiscard]] float out(uint32_t i) const {
    float f;
    std::memcpy(&f, c.out[c.cur] + 4 * i, 4);
    return f;
  }
};

TEST(HubChunk, ARackHubForwardsOnceItsRanksPushedAndIsDoneOnlyWithTheResult) {
  HubChunk h(0, 1, false);
  EXPECT_EQ(h.push(0), PushResult::accepted);
  EXPECT_EQ(h.push(2), PushResult::rack_complete);
  EXPECT_TRUE(locally_complete(h.m, h.c, 0));
  const auto x0 = HubChunk::values(0, 32), x2 = HubChunk::values(2, 32);
  for (uint32_t i = 0; i < 32; ++i) ASSERT_EQ(forward_source(h.m, h.c)[i], x0[i] + x2[i]) << i;
  EXPECT_FALSE(segment_done(h.m, h.c, 0));
  EXPECT_FALSE(round_complete(h.c));
  EXPECT_EQ(h.push(2), PushResult::duplicate) << "not done before the home's result";
  EXPECT_EQ(first_missing_rank(h.m, h.c), 1) << "waiting for the home: its rack's first rank";

  std::vector<float> result(32, 7.5f);
  const auto* bytes = reinterpret_cast<const std::byte*>(result.data());
  EXPECT_EQ(accept_result(h.m, h.c, 1, 0, bytes), ResultArrival::other_round);
  EXPECT_EQ(accept_result(h.m, h.c, 0, 0, bytes), ResultArrival::completed);
  EXPECT_TRUE(segment_done(h.m, h.c, 0));
  EXPECT_TRUE(round_complete(h.c));
  EXPECT_EQ(h.out(31), 7.5f);
  EXPECT_EQ(accept_result(h.m, h.c, 0, 0, bytes), ResultArrival::duplicate);
  EXPECT_EQ(h.push(0), PushResult::duplicate_complete);

  advance_round(h.m, h.c);
  EXPECT_FALSE(segment_done(h.m, h.c, 0));
  EXPECT_EQ(accept_result(h.m, h.c, 1, 0, bytes), ResultArrival::not_forwarded) << "its ranks have not pushed";
}

TEST(HubChunk, APsRackHubKeepsNoOptimizerStateAndTakesTheHomesWeightsOnce) {
  const HubChunk home(0, 0, false, true);
  EXPECT_NE(home.c.weights, nullptr);
  EXPECT_NE(home.c.moment2, nullptr);
  HubChunk h(1, 0, false, true);  // rack 1's hub, the chunk homed at rack 0
  EXPECT_EQ(h.c.weights, nullptr);
  EXPECT_EQ(h.c.moment1, nullptr);
  EXPECT_EQ(h.c.moment2, nullptr);
  EXPECT_EQ(h.push(1), PushResult::not_initialized);
  const std::vector<float> w(32, 0.5f), other(32, 9.0f);
  const auto* bytes = reinterpret_cast<const std::byte*>(w.data());
  EXPECT_EQ(accept_weights(h.m, h.c, 0, 0, bytes), WeightsArrival::other_round) << "round 0's label, not the init's";
  EXPECT_FALSE(segment_initialized(h.c, 0));
  EXPECT_EQ(accept_weights(h.m, h.c, UINT32_MAX, 0, bytes), WeightsArrival::stored);
  EXPECT_TRUE(segment_initialized(h.c, 0));
  EXPECT_TRUE(h.c.initialized);
  const auto [buffer, label] = newest_result(h.m, h.c);
  EXPECT_EQ(label, UINT32_MAX);
  float first = 0;
  std::memcpy(&first, h.c.out[buffer], 4);
  EXPECT_EQ(first, 0.5f) << "what a pull returns";
  EXPECT_EQ(accept_weights(h.m, h.c, UINT32_MAX, 0, reinterpret_cast<const std::byte*>(other.data())),
            WeightsArrival::duplicate);
  std::memcpy(&first, h.c.out[buffer], 4);
  EXPECT_EQ(first, 0.5f) << "a second copy changes nothing";
  EXPECT_EQ(h.push(1), PushResult::accepted);
  EXPECT_EQ(h.push(3), PushResult::rack_complete);
}

TEST(HubChunk, AHomeCountsOnePartialPerRackAndPieceInAnyOrder) {
  HubChunk h(0, 0, false);
  const auto p1 = HubChunk::values(9, 32);  // rack 1's partial
  // A piece before any push starts the sum from zero; a push then adds to it.
  EXPECT_EQ(h.partial(1, 1, p1), PushResult::accepted);
  EXPECT_EQ(h.partial(1, 1, p1), PushResult::duplicate);
  EXPECT_EQ(h.push(2), PushResult::accepted);
  EXPECT_EQ(h.partial(1, 0, p1), PushResult::accepted);
  EXPECT_EQ(first_missing_rank(h.m, h.c), 0);
  EXPECT_EQ(h.push(0), PushResult::segment_complete);
  const auto x0 = HubChunk::values(0, 32), x2 = HubChunk::values(2, 32);
  for (uint32_t i = 0; i < 32; ++i) {
    const float want = i >= 16 ? (p1[i] + x2[i]) + x0[i] : (x2[i] + p1[i]) + x0[i];  // arrival order
    ASSERT_EQ(h.out(i), want) << i;
  }
  EXPECT_TRUE(round_complete(h.c));
  EXPECT_EQ(h.partial(1, 0, p1), PushResult::duplicate_complete) << "a resent partial asks for the result again";
  advance_round(h.m, h.c);
  EXPECT_EQ(h.partial(1, 0, p1, 0), PushResult::previous_round);
  EXPECT_EQ(h.partial(1, 0, p1, 2), PushResult::ahead);
}

TEST(HubChunk, ADeterministicHomeAddsTheRacksInOrderWhateverTheArrival) {
  const auto p1 = HubChunk::values(9, 32);
  const auto x0 = HubChunk::values(0, 32), x2 = HubChunk::values(2, 32);
  for (bool partial_first : {true, false}) {
    HubChunk h(0, 0, true);
    if (partial_first) {
      ASSERT_EQ(h.partial(1, 0, p1), PushResult::accepted);
      ASSERT_EQ(h.partial(1, 1, p1), PushResult::accepted);
    }
    ASSERT_EQ(h.push(2), PushResult::accepted);
    ASSERT_EQ(h.push(0), partial_first ? PushResult::segment_complete : PushResult::accepted);
    if (!partial_first) {
      ASSERT_EQ(h.partial(1, 1, p1), PushResult::accepted);
      ASSERT_EQ(h.partial(1, 0, p1), PushResult::segment_complete);
    }
    for (uint32_t i = 0; i < 32; ++i) ASSERT_EQ(h.out(i), (x0[i] + x2[i]) + p1[i]) << i << (partial_first ? " partial first" : "");
  }
}

}  // namespace
}  // namespace phub::engine
