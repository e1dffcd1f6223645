// Seeded randomness of the stress test: a splitmix64 stream for the generator's and the schedule's
// decisions, and a keyed hash for values that must not depend on the order in which decisions were taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace phub::stress {

// splitmix64's finaliser: a bijective mix of 64 bits.
constexpr uint64_t mix64(uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A hash of a sequence of integers (order matters).
inline uint64_t hash_of(std::initializer_list<uint64_t> parts) noexcept {
  uint64_t h = 0x7068756273747273ULL;
  for (const uint64_t p : parts) h = mix64(h ^ p);
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) noexcept : state_(seed) {}

  uint64_t next() noexcept { return mix64(state_++); }
  // Uniform in [0, n); 0 when n is 0.
  uint64_t below(uint64_t n) noexcept { return n == 0 ? 0 : next() % n; }
  // Uniform in [lo, hi].
  int64_t between(int64_t lo, int64_t hi) noexcept {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }
  // Uniform in [0, 1).
  double unit() noexcept { return static_cast<double>(next() >> 11) * 0x1p-53; }
  bool chance(double p) noexcept { return p > 0 && unit() < p; }
  template <class T, size_t N>
  const T& pick(const T (&items)[N]) noexcept {
    return items[below(N)];
  }

 private:
  uint64_t state_;
};

}  // namespace phub::stress
