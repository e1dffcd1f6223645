// Seeded push values and initial weights (see values.hpp).
#include "values.hpp"

#include <cmath>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "rng.hpp"

namespace phub::stress {
namespace {

// A float of mixed magnitude, 2^-6 .. 2^7, either sign; zero now and then. Up to 32 of them sum exactly
// in double (exponents 13 apart, 24-bit significands, 5 bits of carries: 42 bits < 53).
float mixed_float(uint64_t h) {
  if ((h & 63) == 0) return 0.0F;
  const int exponent = static_cast<int>((h >> 6) % 13) - 6;
  const float significand = 1.0F + static_cast<float>((h >> 12) & 0x7fffff) * 0x1p-23F;
  const float v = std::ldexp(significand, exponent);
  return (h >> 40) & 1 ? -v : v;
}

const agg::Kernels& scalar() { return agg::kernels_for(agg::Isa::scalar); }

}  // namespace

PushValues::PushValues(uint64_t seed, uint64_t epoch, const JobShape& shape)
    : key_(hash_of({seed, epoch, shape.job.id})),
      dtype_(shape.job.dtype),
      integers_(shape.values == Values::small_integers) {}

// Narrowed to the job's dtype on the way out (round to nearest even, as the server's kernels do): the
// bytes on the wire are what both the server and the model sum.
void PushValues::gradient(uint32_t chunk, int64_t round, uint16_t rank, uint32_t first, uint32_t n,
                          std::byte* out) const {
  const uint64_t key = hash_of({key_, chunk, static_cast<uint64_t>(round), rank});
  std::vector<float> v(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t h = mix64(key ^ (first + i));
    v[i] = integers_ ? static_cast<float>(h % 17) - 8.0F : mixed_float(h);
  }
  scalar().narrow(out, v.data(), dtype_, n);
}

void PushValues::initial_weights(uint32_t chunk, uint32_t first, uint32_t n, Dtype d, std::byte* out) const {
  const uint64_t key = hash_of({key_, chunk, 0x1417});
  std::vector<float> v(n);
  for (uint32_t i = 0; i < n; ++i) v[i] = std::ldexp(mixed_float(mix64(key ^ (first + i))), -4);  // about [-4, 4]
  // Values of the job's dtype, whichever dtype they travel in.
  std::vector<std::byte> narrow(n * dtype_bytes(dtype_));
  scalar().narrow(narrow.data(), v.data(), dtype_, n);
  scalar().init(v.data(), narrow.data(), dtype_, n);
  scalar().narrow(out, v.data(), d, n);
}

}  // namespace phub::stress
