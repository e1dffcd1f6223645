// Tall sums (k = 0..9 and 17, init or not) and scaling of every ISA against the reference, bit for bit.
#include <algorithm>
#include <cstring>
#include <memory>

#include "reference.hpp"
#include "support.hpp"

namespace phub::agg::test {
namespace {

using TallTest = IsaTest;

struct TallCase {
  Dtype d;
  size_t k;
  size_t n;
  bool init;
  size_t src_off;  // source j sits (src_off + j) % 4 bytes past alignment, or aligned when 0
  size_t dst_off_floats;
};

void check_tall(const Kernels& kern, const TallCase& c, std::mt19937& rng) {
  const size_t eb = dtype_bytes(c.d);
  std::vector<std::unique_ptr<Buffer>> srcs;
  std::vector<const std::byte*> ptrs;
  for (size_t j = 0; j < c.k; ++j) {
    srcs.push_back(std::make_unique<Buffer>(c.n * eb, c.src_off == 0 ? 0 : (c.src_off + j) % 4));
    fill_random(srcs.back()->data(), c.d, c.n, rng, false);
    ptrs.push_back(srcs.back()->data());
  }
  Buffer dst(c.n * 4, 4 * c.dst_off_floats);
  fill_random(dst.data(), Dtype::fp32, c.n, rng, false);
  std::vector<float> expect(dst.floats(), dst.floats() + c.n);
  ref::tall(expect.data(), ptrs, c.d, c.n, c.init);
  kern.tall(dst.floats(), ptrs.data(), c.k, c.d, c.n, c.init);
  for (size_t i = 0; i < c.n; ++i) {
    ASSERT_EQ(ref::bits_of(dst.floats()[i]), ref::bits_of(expect[i]))
        << dtype_name(c.d) << " k=" << c.k << " n=" << c.n << " init=" << c.init << " src_off=" << c.src_off
        << " dst_off=" << c.dst_off_floats << " i=" << i;
  }
  ASSERT_TRUE(dst.guard_intact()) << "wrote past dst: k=" << c.k << " n=" << c.n;
}

TEST_P(TallTest, MatchesReference) {
  std::mt19937 rng(3);
  for (const Dtype d : kDtypes) {
    for (const size_t k : {0U, 1U, 2U, 3U, 4U, 5U, 6U, 7U, 8U, 9U, 17U}) {
      for (const bool init : {true, false}) {
        for (const size_t n : test_lengths()) {
          check_tall(*k_, {d, k, n, init, 0, 0}, rng);
          check_tall(*k_, {d, k, n, init, 1 + n % 3, 1 + n % 7}, rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

// Rounding makes the order visible: 2^24 + 1 rounds back to 2^24 (tie to even), so only index order gives 0.
TEST_P(TallTest, AddsInIndexOrderAcrossGroups) {
  constexpr size_t kN = 37;
  constexpr size_t kK = 9;  // one more than a pass sums, so the last source is added in a second pass
  std::vector<std::vector<float>> values(kK, std::vector<float>(kN, 1.0F));
  for (size_t i = 0; i < kN; ++i) {
    values[0][i] = 0x1p24F;
    values[kK - 1][i] = -0x1p24F;
  }
  std::vector<const std::byte*> ptrs;
  for (const auto& v : values) ptrs.push_back(reinterpret_cast<const std::byte*>(v.data()));
  std::vector<float> dst(kN, 123.0F);
  k_->tall(dst.data(), ptrs.data(), kK, Dtype::fp32, kN, true);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(dst[i], 0.0F) << "i=" << i;
  std::fill(dst.begin(), dst.end(), 1.0F);  // 1 + 2^24 also rounds to 2^24 first
  k_->tall(dst.data(), ptrs.data(), kK, Dtype::fp32, kN, false);
  for (size_t i = 0; i < kN; ++i) ASSERT_EQ(dst[i], 0.0F) << "i=" << i;
}

TEST_P(TallTest, InitEqualsInitThenAccumulate) {
  std::mt19937 rng(4);
  constexpr size_t kN = 1031;
  for (const Dtype d : kDtypes) {
    std::vector<std::unique_ptr<Buffer>> srcs;
    std::vector<const std::byte*> ptrs;
    for (size_t j = 0; j < 5; ++j) {
      srcs.push_back(std::make_unique<Buffer>(kN * dtype_bytes(d), j % 4));
      fill_random(srcs.back()->data(), d, kN, rng, true);
      ptrs.push_back(srcs.back()->data());
    }
    std::vector<float> tall_out(kN);
    std::vector<float> stepwise(kN);
    k_->tall(tall_out.data(), ptrs.data(), ptrs.size(), d, kN, true);
    k_->init(stepwise.data(), ptrs[0], d, kN);
    for (size_t j = 1; j < ptrs.size(); ++j) k_->accumulate(stepwise.data(), ptrs[j], d, kN);
    for (size_t i = 0; i < kN; ++i) ASSERT_TRUE(ref::same(tall_out[i], stepwise[i])) << dtype_name(d) << " i=" << i;
  }
}

TEST_P(TallTest, ScaleMatchesReference) {
  std::mt19937 rng(5);
  for (const size_t n : test_lengths()) {
    for (size_t off = 0; off < 3; ++off) {
      Buffer buf(n * 4, 4 * off);
      fill_random(buf.data(), Dtype::fp32, n, rng, true);
      const float s = 1.0F / static_cast<float>(3 + n % 5);
      std::vector<float> expect(buf.floats(), buf.floats() + n);
      for (float& x : expect) x = x * s;
      k_->scale(buf.floats(), s, n);
      for (size_t i = 0; i < n; ++i) ASSERT_TRUE(ref::same(buf.floats()[i], expect[i])) << "n=" << n << " i=" << i;
      ASSERT_TRUE(buf.guard_intact());
    }
  }
}

PHUB_AGG_INSTANTIATE(TallTest);

}  // namespace
}  // namespace phub::agg::test
