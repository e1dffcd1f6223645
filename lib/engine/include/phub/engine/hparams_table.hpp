// The hyperparameter sets one lcore holds for one ps job (docs/protocol.md, "Hyperparameters"): registered by
// the workers' hparams messages, looked up by the id a round's first push names. A fixed number of slots: a
// full table replaces the set used longest ago (a round in progress keeps its own copy, Chunk::hp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include <optional>

#include "phub/agg/kernels.hpp"
#include "phub/proto/hparams.hpp"

namespace phub::engine {

// The values a set gives a job whose configured optimizer is `job` (its kind and adamw stay), or nullopt when
// the set is for another torch optimizer: SGD sets (momentum 0, no Nesterov) for sgd, SGD sets without
// Nesterov for momentum, Nesterov sets for nesterov, Adam sets for adam, AdamW sets for adam with adamw.
[[nodiscard]] std::optional<agg::OptimizerParams> hparams_for_job(const agg::OptimizerParams& job,
                                                                  const proto::Hparams& h) noexcept;
// The job's optimizer as an error's aux names it: 0 sgd, 1 momentum, 2 nesterov, 3 adam, 4 adamw.
[[nodiscard]] uint32_t optimizer_code(const agg::OptimizerParams& job) noexcept;

class HparamsTable {
 public:
  // Sets a job's workers may name in one step (one per parameter group), with room for the next step's.
  static constexpr size_t kSlots = 64;

  // The set `id` names (refreshed as used), or null.
  [[nodiscard]] const agg::OptimizerParams* find(uint64_t id) noexcept {
    const size_t i = index_of(id);
    return i == kSlots ? nullptr : touch(i);
  }
  // Its wire form (what a rack hub forwards to a chunk's home), or null.
  [[nodiscard]] const proto::HparamsWire* wire(uint64_t id) noexcept {
    const size_t i = index_of(id);
    return i == kSlots ? nullptr : &slots_[i].wire;
  }
  // Holds `p` as set `id` (id != 0, `wire` its wire form); an id held already keeps its values (the id is a hash
  // of them).
  void put(uint64_t id, const agg::OptimizerParams& p, const proto::HparamsWire& wire) noexcept {
    if (find(id) != nullptr) return;
    size_t oldest = 0;
    for (size_t i = 1; i < kSlots; ++i) {
      if (slots_[i].used < slots_[oldest].used) oldest = i;
    }
    slots_[oldest] = Slot{id, 0, p, wire};
    (void)touch(oldest);
  }

 private:
  struct Slot {
    uint64_t id = 0;    // 0: free
    uint64_t used = 0;  // clock_ when last found or put
    agg::OptimizerParams params;
    proto::HparamsWire wire{};
  };
  size_t index_of(uint64_t id) const noexcept {
    if (id == 0) return kSlots;
    if (slots_[last_].id == id) return last_;
    for (size_t i = 0; i < kSlots; ++i) {
      if (slots_[i].id == id) return i;
    }
    return kSlots;
  }
  const agg::OptimizerParams* touch(size_t i) noexcept {
    slots_[i].used = ++clock_;
    last_ = i;
    return &slots_[i].params;
  }
  std::array<Slot, kSlots> slots_{};
  size_t last_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace phub::engine
