// init/accumulate (widening) and narrow (rounding) of every ISA against the reference, plus fixed special values.
#include <cmath>
#include <cstring>

#include "reference.hpp"
#include "support.hpp"

namespace phub::agg::test {
namespace {

using ConvertTest = IsaTest;

uint16_t get16(const std::byte* p) {
  return static_cast<uint16_t>(std::to_integer<uint16_t>(p[0]) | (std::to_integer<uint16_t>(p[1]) << 8));
}

TEST_P(ConvertTest, InitAndAccumulateMatchReference) {
  std::mt19937 rng(1);
  for (const Dtype d : kDtypes) {
    for (const size_t n : test_lengths()) {
      for (size_t src_off = 0; src_off < 4; ++src_off) {
        const size_t dst_off = 4 * (src_off % 3);  // 0, 4, 8 bytes: float-aligned, not vector-aligned
        Buffer src(n * dtype_bytes(d), src_off);
        Buffer dst(n * 4, dst_off);
        fill_random(src.data(), d, n, rng, true);
        k_->init(dst.floats(), src.data(), d, n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(ref::same(dst.floats()[i], ref::widen(d, src.data() + i * dtype_bytes(d))))
              << dtype_name(d) << " init n=" << n << " i=" << i << " src_off=" << src_off;
        }
        fill_random(dst.data(), Dtype::fp32, n, rng, false);
        std::vector<float> expect(dst.floats(), dst.floats() + n);
        ref::tall(expect.data(), {src.data()}, d, n, false);
        k_->accumulate(dst.floats(), src.data(), d, n);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_TRUE(ref::same(dst.floats()[i], expect[i]))
              << dtype_name(d) << " accumulate n=" << n << " i=" << i << " src_off=" << src_off;
        }
        ASSERT_TRUE(src.guard_intact() && dst.guard_intact()) << dtype_name(d) << " n=" << n;
      }
    }
  }
}

TEST_P(ConvertTest, NarrowMatchesReference) {
  std::mt19937 rng(2);
  for (const Dtype d : kDtypes) {
    const size_t eb = dtype_bytes(d);
    for (const size_t n : test_lengths()) {
      for (size_t dst_off = 0; dst_off < 4; ++dst_off) {
        Buffer src(n * 4, 4 * dst_off);
        Buffer dst(n * eb, dst_off);
        fill_random(src.data(), Dtype::fp32, n, rng, true);
        for (size_t i = 0; i < n; i += 3) src.floats()[i] = ref::float_of(static_cast<uint32_t>(rng()));  // any bits
        k_->narrow(dst.data(), src.floats(), d, n);
        for (size_t i = 0; i < n; ++i) {
          const float x = src.floats()[i];
          if (d == Dtype::fp32) {
            float out;
            std::memcpy(&out, dst.data() + 4 * i, 4);
            ASSERT_EQ(ref::bits_of(out), ref::bits_of(x)) << "fp32 narrow is a copy, i=" << i;
            continue;
          }
          const uint16_t got = get16(dst.data() + eb * i);
          if (std::isnan(x)) {
            ASSERT_TRUE(ref::is_nan16(d, got)) << dtype_name(d) << " NaN must stay NaN, got " << got;
          } else {
            ASSERT_EQ(got, ref::narrow16(d, x)) << dtype_name(d) << " x=" << x << " bits=" << ref::bits_of(x);
          }
        }
        ASSERT_TRUE(dst.guard_intact()) << dtype_name(d) << " n=" << n;
      }
    }
  }
}

TEST_P(ConvertTest, EverySixteenBitPatternRoundTrips) {
  constexpr size_t kPatterns = 1U << 16;
  for (const Dtype d : {Dtype::fp16, Dtype::bf16}) {
    std::vector<std::byte> in(2 * kPatterns);
    std::vector<std::byte> out(2 * kPatterns);
    std::vector<float> wide(kPatterns);
    for (size_t h = 0; h < kPatterns; ++h) {
      in[2 * h] = static_cast<std::byte>(h & 0xff);
      in[2 * h + 1] = static_cast<std::byte>(h >> 8);
    }
    k_->init(wide.data(), in.data(), d, kPatterns);
    k_->narrow(out.data(), wide.data(), d, kPatterns);
    for (size_t h = 0; h < kPatterns; ++h) {
      ASSERT_TRUE(ref::same(wide[h], ref::widen(d, in.data() + 2 * h))) << dtype_name(d) << " pattern " << h;
      const uint16_t back = get16(out.data() + 2 * h);
      if (ref::is_nan16(d, static_cast<uint16_t>(h))) {
        ASSERT_TRUE(std::isnan(wide[h]) && ref::is_nan16(d, back)) << dtype_name(d) << " NaN pattern " << h;
      } else {
        ASSERT_EQ(back, h) << dtype_name(d);
      }
    }
  }
}

struct Special {
  uint32_t fp32_bits;
  uint16_t fp16;
  uint16_t bf16;
};

// Expected patterns worked out by hand (round to nearest, ties to even).
constexpr Special kSpecials[] = {
    {0x00000000, 0x0000, 0x0000},  // +0
    {0x80000000, 0x8000, 0x8000},  // -0
    {0x3f800000, 0x3c00, 0x3f80},  // 1
    {0x477fe000, 0x7bff, 0x4780},  // 65504: fp16 max; bf16 rounds up to 65536
    {0x477fef00, 0x7bff, 0x4780},  // 65519: still fp16 max
    {0x477ff000, 0x7c00, 0x4780},  // 65520: tie between 65504 and 2^16 goes to even: fp16 inf
    {0x7f7fffff, 0x7c00, 0x7f80},  // FLT_MAX: inf in both
    {0x7f7f8000, 0x7c00, 0x7f80},  // bf16 tie between max (odd) and 2^128: inf
    {0x7f800000, 0x7c00, 0x7f80},  // +inf
    {0xff800000, 0xfc00, 0xff80},  // -inf
    {0x33800000, 0x0001, 0x3380},  // 2^-24: smallest fp16 subnormal
    {0x33000000, 0x0000, 0x3300},  // 2^-25: tie between 0 and 2^-24: zero
    {0x33000001, 0x0001, 0x3300},  // just above 2^-25
    {0x33c00000, 0x0002, 0x33c0},  // 1.5 * 2^-24: tie goes to even 2
    {0x387fc000, 0x03ff, 0x3880},  // largest fp16 subnormal
    {0x387fe000, 0x0400, 0x3880},  // tie to the smallest fp16 normal
    {0x3f801000, 0x3c00, 0x3f80},  // 1 + 2^-11: fp16 tie, down to even
    {0x3f803000, 0x3c02, 0x3f80},  // 1 + 3*2^-11: fp16 tie, up to even
    {0x3f808000, 0x3c04, 0x3f80},  // 1 + 2^-8: bf16 tie, down to even
    {0x3f818000, 0x3c0c, 0x3f82},  // 1 + 3*2^-8: bf16 tie, up to even
    {0x00010000, 0x0000, 0x0001},  // fp32 subnormal: bf16 keeps it
    {0x80000001, 0x8000, 0x8000},  // tiny negative: -0
};

TEST_P(ConvertTest, SpecialValues) {
  for (const Special& s : kSpecials) {
    const float x = ref::float_of(s.fp32_bits);
    EXPECT_EQ(ref::narrow16(Dtype::fp16, x), s.fp16) << "reference fp16 of " << std::hex << s.fp32_bits;
    EXPECT_EQ(ref::narrow16(Dtype::bf16, x), s.bf16) << "reference bf16 of " << std::hex << s.fp32_bits;
    std::byte out[2];
    k_->narrow(out, &x, Dtype::fp16, 1);
    EXPECT_EQ(get16(out), s.fp16) << "fp16 of " << std::hex << s.fp32_bits;
    k_->narrow(out, &x, Dtype::bf16, 1);
    EXPECT_EQ(get16(out), s.bf16) << "bf16 of " << std::hex << s.fp32_bits;
  }
  for (const uint32_t nan_bits : {0x7fc00000U, 0xffc00000U, 0x7f800001U, 0x7fbfffffU, 0xff802000U}) {
    const float x = ref::float_of(nan_bits);
    std::byte out[2];
    for (const Dtype d : {Dtype::fp16, Dtype::bf16}) {
      k_->narrow(out, &x, d, 1);
      EXPECT_TRUE(ref::is_nan16(d, get16(out))) << dtype_name(d) << " of NaN " << std::hex << nan_bits;
    }
  }
}

PHUB_AGG_INSTANTIATE(ConvertTest);

}  // namespace
}  // namespace phub::agg::test
