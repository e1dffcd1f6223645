// The scalar model of one job: every result the server should send, for every chunk and round, computed
// with lib/agg's scalar kernels in rank order. kernels.hpp promises that the server's SIMD kernels give
// the same bits for the same inputs and order, so wherever the order cannot matter (integer sums) or is
// fixed (deterministic mode) the model is bit-exact, optimizer steps included.
//
// Where the server sums random floats in arrival order, the order changes the rounding. Each element of
// the fp32 sum S' of W values x_i in any order then lies within
//   |S' - S| <= gamma(W-1) * sum|x_i|,  gamma(n) = n u / (1 - n u),  u = 2^-24  (about (W-1) * 2^-24 * sum|x_i|)
// of the exact sum S (recursive summation, Higham, Accuracy and Stability, 2.2), before the mean's scaling
// and the narrowing to bf16/fp16. Both of those are monotone, so the result must lie between the results
// of the interval's ends: that is the range the model gives for such a job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "phub/proto/layout.hpp"
#include "shape.hpp"
#include "values.hpp"

namespace phub::stress {

class Model {
 public:
  Model(const JobShape& shape, const proto::Layout& layout, const PushValues& values);

  // Chunk `chunk`'s result of absolute round `round` (0 .. rounds-1; -1: the ps initial weights), all of
  // its elements, as the server sends them (the job's dtype).
  [[nodiscard]] std::span<const std::byte> result(uint32_t chunk, int64_t round) const;
  [[nodiscard]] bool bit_exact() const noexcept { return bit_exact_; }
  // Jobs that are not bit-exact: the lowest and highest value element `elem` of that result may take.
  [[nodiscard]] float lowest(uint32_t chunk, int64_t round, uint32_t elem) const;
  [[nodiscard]] float highest(uint32_t chunk, int64_t round, uint32_t elem) const;

 private:
  struct ChunkResults {
    std::vector<std::vector<std::byte>> by_round;  // [round + 1]
    std::vector<std::vector<float>> low, high;     // [round + 1], bounded jobs only
  };
  void compute_chunk(uint32_t chunk, uint32_t elems, ChunkResults& out) const;

  const JobShape& shape_;
  const PushValues& values_;
  bool bit_exact_;
  std::vector<ChunkResults> chunks_;
};

}  // namespace phub::stress
