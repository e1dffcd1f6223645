// NaN/Inf detection over wire elements (nonfinite.hpp). Little-endian hosts read the elements directly; the
// exponent test is the same for every width: all exponent bits set.
#include "phub/agg/nonfinite.hpp"

#include <bit>
#include <cstring>

namespace phub::agg {
namespace {

static_assert(std::endian::native == std::endian::little, "elements are read in place as little-endian words");

template <class Word, Word kExponent>
bool any_of_words(const std::byte* p, size_t n) noexcept {
  Word seen = 0;  // OR of (exponent bits all set) over the elements, kept as a word so the loop vectorises
  for (size_t i = 0; i < n; ++i) {
    Word w;
    std::memcpy(&w, p + i * sizeof(Word), sizeof w);
    seen |= static_cast<Word>((w & kExponent) == kExponent);
  }
  return seen != 0;
}

template <class Word, Word kExponent>
size_t first_of_words(const std::byte* p, size_t n) noexcept {
  for (size_t i = 0; i < n; ++i) {
    Word w;
    std::memcpy(&w, p + i * sizeof(Word), sizeof w);
    if ((w & kExponent) == kExponent) return i;
  }
  return n;
}

constexpr uint32_t kFp32Exponent = 0x7f800000u;
constexpr uint16_t kFp16Exponent = 0x7c00u;
constexpr uint16_t kBf16Exponent = 0x7f80u;

}  // namespace

bool any_nonfinite(const std::byte* p, Dtype d, size_t n) noexcept {
  switch (d) {
    case Dtype::fp32: return any_of_words<uint32_t, kFp32Exponent>(p, n);
    case Dtype::fp16: return any_of_words<uint16_t, kFp16Exponent>(p, n);
    case Dtype::bf16: return any_of_words<uint16_t, kBf16Exponent>(p, n);
  }
  return false;
}

size_t first_nonfinite(const std::byte* p, Dtype d, size_t n) noexcept {
  switch (d) {
    case Dtype::fp32: return first_of_words<uint32_t, kFp32Exponent>(p, n);
    case Dtype::fp16: return first_of_words<uint16_t, kFp16Exponent>(p, n);
    case Dtype::bf16: return first_of_words<uint16_t, kBf16Exponent>(p, n);
  }
  return n;
}

}  // namespace phub::agg
