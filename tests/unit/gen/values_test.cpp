// Generated gradients: exact sums in every dtype, order sensitivity, expected results computed independently.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "phub/gen/values.hpp"
#include "phub/gen/workload.hpp"

namespace phub::gen {
namespace {

// Round-to-nearest-even fp32 -> bf16, written independently of lib/agg.
uint16_t bf16_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t lsb = (u >> 16) & 1;
  return static_cast<uint16_t>((u + 0x7fff + lsb) >> 16);
}

JobSpec spec(Dtype d, uint16_t workers, bool mean) {
  JobSpec s;
  s.dtype = d;
  s.workers = workers;
  s.mean = mean;
  s.key_elems = {5000, 777};
  s.chunk_bytes = 4096;
  s.server_lcores = 2;
  return s;
}

TEST(GenValues, ExactValuesSumExactlyInEveryDtype) {
  for (Dtype d : {Dtype::fp32, Dtype::fp16, Dtype::bf16}) {
    for (uint16_t w : {1, 2, 7, 32, 100, 300, 1024}) {
      std::vector<double> sum(512, 0.0);
      std::vector<float> v(512);
      for (uint16_t r = 0; r < w; ++r) {
        fill_push_values(Values::exact, d, w, 1, r, v);
        for (size_t i = 0; i < v.size(); ++i) {
          ASSERT_EQ(v[i], std::round(v[i]));
          sum[i] += v[i];
        }
      }
      const double limit = d == Dtype::fp32 ? 16777216.0 : d == Dtype::fp16 ? 2048.0 : 256.0;
      for (double s : sum) ASSERT_LE(std::fabs(s), limit) << dtype_name(d) << " workers " << w;
    }
  }
}

TEST(GenValues, OrderSensitiveValuesDependOnTheOrder) {
  const uint16_t w = 8;
  std::vector<std::vector<float>> v(w, std::vector<float>(352));
  for (uint16_t r = 0; r < w; ++r) fill_push_values(Values::order_sensitive, Dtype::bf16, w, 0, r, v[r]);
  size_t differ = 0;
  for (size_t i = 0; i < 352; ++i) {
    float fwd = 0, back = 0;
    for (uint16_t r = 0; r < w; ++r) fwd += v[r][i];
    for (uint16_t r = w; r-- > 0;) back += v[r][i];
    differ += fwd != back;
  }
  EXPECT_GT(differ, 10u);
}

TEST(GenWorkload, AllreduceResultMatchesAnIndependentSum) {
  for (Dtype d : {Dtype::fp32, Dtype::bf16}) {
    for (bool mean : {false, true}) {
      auto wl = Workload::build(spec(d, 5, mean), 1500);
      ASSERT_TRUE(wl) << wl.error();
      const uint32_t n = wl->segment_elems();
      ASSERT_EQ(n, d == Dtype::fp32 ? 352u : 704u);
      for (uint32_t k = 0; k < kPatterns; ++k) {
        std::vector<float> sum(n, 0.0f), v(n);
        for (uint16_t r = 0; r < 5; ++r) {
          fill_push_values(Values::exact, d, 5, k, r, v);
          for (uint32_t i = 0; i < n; ++i) sum[i] += v[i];
        }
        const auto got = wl->allreduce_result(k, n);
        for (uint32_t i = 0; i < n; ++i) {
          const float want = mean ? sum[i] * (1.0f / 5.0f) : sum[i];
          if (d == Dtype::fp32) {
            float g;
            std::memcpy(&g, got.data() + 4 * i, 4);
            ASSERT_EQ(g, want) << "element " << i;
          } else {
            uint16_t g;
            std::memcpy(&g, got.data() + 2 * i, 2);
            ASSERT_EQ(g, bf16_rne(want)) << "element " << i;
          }
        }
      }
    }
  }
}

TEST(GenWorkload, PatternsDifferBetweenNeighbours) {
  auto wl = Workload::build(spec(Dtype::fp32, 4, false), 1500);
  ASSERT_TRUE(wl);
  EXPECT_NE(pattern_index(3, 1, 0), pattern_index(4, 1, 0));
  EXPECT_NE(pattern_index(3, 1, 0), pattern_index(3, 1, 1));
  const auto a = wl->allreduce_result(0, 352), b = wl->allreduce_result(1, 352);
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size()), 0);
}

TEST(GenWorkload, LogicalRoundsFollowTheModulus) {
  JobSpec s = spec(Dtype::fp32, 2, false);
  s.round_modulus = 8;
  auto wl = Workload::build(s, 1500);
  ASSERT_TRUE(wl);
  EXPECT_EQ(wl->wire_round(19), 3u);
  EXPECT_EQ(wl->logical_round(3, 19), 19u);
  EXPECT_EQ(wl->logical_round(2, 19), 18u);
  EXPECT_EQ(wl->logical_round(4, 19), 20u);
  EXPECT_EQ(wl->logical_round(7, 16), 15u);
  s.round_modulus = 0;
  auto plain = Workload::build(s, 1500);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->logical_round(41, 42), 41u);
}

TEST(GenWorkload, RefusesWhatTheServerWouldRefuse) {
  JobSpec s = spec(Dtype::fp32, 0, false);
  EXPECT_FALSE(Workload::build(s, 1500));
  s.workers = 2;
  EXPECT_FALSE(Workload::build(s, 80));  // no room for elements
}

}  // namespace
}  // namespace phub::gen
