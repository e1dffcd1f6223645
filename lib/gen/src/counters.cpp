// Log-linear latency buckets and percentiles.
#include "phub/gen/counters.hpp"

#include <bit>

namespace phub::gen {

size_t Histogram::bucket(uint64_t v) noexcept {
  if (v < kSub) return static_cast<size_t>(v);
  const unsigned msb = 63u - static_cast<unsigned>(std::countl_zero(v));
  if (msb > kMaxExp) return kBuckets - 1;
  const auto sub = static_cast<size_t>((v >> (msb - 4)) & (kSub - 1));
  return (msb - 3) * kSub + sub;
}

uint64_t Histogram::value(size_t b) noexcept {
  if (b < kSub) return b;
  const size_t msb = b / kSub + 3;
  const uint64_t lo = (uint64_t{1} << msb) | (static_cast<uint64_t>(b % kSub) << (msb - 4));
  return msb >= 5 ? lo + (uint64_t{1} << (msb - 5)) : lo;
}

Histogram::Snapshot Histogram::snapshot() const noexcept {
  Snapshot s{};
  for (size_t i = 0; i < kBuckets; ++i) s[i] = counts_[i].get();
  return s;
}

uint64_t sample_count(const Histogram::Snapshot& s) noexcept {
  uint64_t n = 0;
  for (uint64_t c : s) n += c;
  return n;
}

uint64_t percentile(const Histogram::Snapshot& s, double p) noexcept {
  const uint64_t n = sample_count(s);
  if (n == 0) return 0;
  auto rank = static_cast<uint64_t>(p / 100.0 * static_cast<double>(n));
  if (rank >= n) rank = n - 1;
  uint64_t seen = 0;
  for (size_t b = 0; b < s.size(); ++b) {
    seen += s[b];
    if (seen > rank) return Histogram::value(b);
  }
  return Histogram::value(s.size() - 1);
}

Histogram::Snapshot minus(const Histogram::Snapshot& a, const Histogram::Snapshot& b) noexcept {
  Histogram::Snapshot d{};
  for (size_t i = 0; i < d.size(); ++i) d[i] = a[i] >= b[i] ? a[i] - b[i] : 0;
  return d;
}

void accumulate(Histogram::Snapshot& into, const Histogram::Snapshot& s) noexcept {
  for (size_t i = 0; i < into.size(); ++i) into[i] += s[i];
}

}  // namespace phub::gen
