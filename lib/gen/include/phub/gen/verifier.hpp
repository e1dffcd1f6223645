// Checks every result the server returns against the value it must have, bit for bit. Allreduce results
// come from the workload's precomputed patterns; ps results come from a model of the server's weights
// that replays the same updates with lib/agg's scalar kernels (bit-identical to the server's SIMD ones).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/gen/slots.hpp"
#include "phub/gen/workload.hpp"

namespace phub::gen {

enum class Check : uint8_t {
  ok,
  mismatch,
  unverifiable,  // ps: a round older than the two the model keeps
};

struct Mismatch {
  uint32_t rank = 0, chunk = 0, seg = 0, elem = 0;
  uint64_t round = 0;
  float got = 0, want = 0;
  bool init = false;
  [[nodiscard]] std::string describe(uint32_t job_id) const;
};

class Verifier {
 public:
  Verifier() = default;
  Verifier(const Workload& wl, const SlotMap& slots);

  // The result of logical round `round` for slot `slot`.
  [[nodiscard]] Check check_result(uint16_t rank, uint32_t slot, uint64_t round, std::span<const std::byte> payload);
  // ps: the answer to rank 0's init (the initial weights, narrowed to the job's dtype).
  [[nodiscard]] Check check_init_ack(uint32_t slot, std::span<const std::byte> payload);

  // Expected bytes (nullopt-like empty span when unverifiable). Exposed for tests and pcap checks.
  [[nodiscard]] std::span<const std::byte> expected_result(uint32_t slot, uint64_t round);
  [[nodiscard]] std::span<const std::byte> expected_init_ack(uint32_t slot);

  // The first mismatches seen (at most kKeep), for diagnostics.
  static constexpr size_t kKeep = 8;
  [[nodiscard]] const std::vector<Mismatch>& mismatches() const noexcept { return kept_; }

 private:
  struct PsSlot {
    size_t offset = 0;          // into the weight arrays
    uint64_t updates = 0;       // optimizer updates replayed so far
    uint64_t cached_round[2] = {~uint64_t{0}, ~uint64_t{0}};
  };
  void advance(uint32_t slot, uint64_t updates);
  Check compare(uint16_t rank, uint32_t slot, uint64_t round, bool init, std::span<const std::byte> want,
                std::span<const std::byte> got);

  const Workload* wl_ = nullptr;
  const SlotMap* slots_ = nullptr;
  std::vector<PsSlot> ps_;
  std::vector<float> weights_, m1_, m2_;
  std::vector<std::byte> cache_;  // [slot offset elems][2] results in the job's dtype
  std::vector<std::byte> init_ack_;
  std::vector<Mismatch> kept_;
};

}  // namespace phub::gen
