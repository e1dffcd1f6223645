// What each emulated rank pushes and what rank 0 initialises the weights with: a pure function of the
// run's seed, the epoch, the job and the element's position, so that workers and the model agree without
// storing anything and a seed replays the same numbers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "phub/base/dtype.hpp"
#include "shape.hpp"

namespace phub::stress {

class PushValues {
 public:
  PushValues(uint64_t seed, uint64_t epoch, const JobShape& shape);

  // The wire bytes (the job's dtype) that `rank` pushes for elements [first, first + n) of `chunk` in the
  // absolute round `round`.
  void gradient(uint32_t chunk, int64_t round, uint16_t rank, uint32_t first, uint32_t n, std::byte* out) const;
  // ps: the initial weights of those elements in dtype `d`: the job's dtype, or fp32 (the same numbers:
  // values of the job's dtype, widened).
  void initial_weights(uint32_t chunk, uint32_t first, uint32_t n, Dtype d, std::byte* out) const;

 private:
  uint64_t key_;
  Dtype dtype_;
  bool integers_;
};

}  // namespace phub::stress
