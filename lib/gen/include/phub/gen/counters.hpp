// Counters written by one generator lcore and read, at any time, by the control thread; and a latency
// histogram with log-linear buckets (about 6% resolution) that gives percentiles.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace phub::gen {

// A single-writer counter: the owner adds without a locked instruction, anyone may read.
class Counter {
 public:
  void add(uint64_t n = 1) noexcept { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void set(uint64_t n) noexcept { v_.store(n, std::memory_order_relaxed); }
  [[nodiscard]] uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Histogram {
 public:
  static constexpr unsigned kSub = 16;  // buckets per power of two
  static constexpr unsigned kMaxExp = 44;
  static constexpr size_t kBuckets = (kMaxExp + 1) * kSub;

  void record(uint64_t v) noexcept { counts_[bucket(v)].add(); }
  [[nodiscard]] static size_t bucket(uint64_t v) noexcept;
  // A representative value (the middle) of bucket b.
  [[nodiscard]] static uint64_t value(size_t b) noexcept;

  using Snapshot = std::array<uint64_t, kBuckets>;
  [[nodiscard]] Snapshot snapshot() const noexcept;

 private:
  std::array<Counter, kBuckets> counts_{};
};

// Percentile p (0..100) of the samples in `s`, 0 if empty.
[[nodiscard]] uint64_t percentile(const Histogram::Snapshot& s, double p) noexcept;
[[nodiscard]] uint64_t sample_count(const Histogram::Snapshot& s) noexcept;
// a - b, bucket by bucket (the samples recorded between two snapshots).
[[nodiscard]] Histogram::Snapshot minus(const Histogram::Snapshot& a, const Histogram::Snapshot& b) noexcept;
void accumulate(Histogram::Snapshot& into, const Histogram::Snapshot& s) noexcept;

}  // namespace phub::gen
