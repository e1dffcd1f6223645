// Seeded generator of what one epoch of the stress run serves: 1 or 2 lcores and 1-4 jobs of random
// shape (mode, optimizer, dtype, workers, keys, chunk size, reduction, round modulus), each with the
// knobs that say how hostile its emulated workers are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/config/config.hpp"
#include "phub/proto/layout.hpp"

namespace phub::stress {

enum class Values : uint8_t {
  small_integers,  // integers in [-8, 8]: every sum of up to 32 is exact in fp32, bf16 and fp16 results too
  random_floats,   // any finite values of mixed magnitude: exact only where the server sums in rank order
};

// Probabilities of the schedule's hostile decisions (schedule.cpp says where each one is taken).
struct Knobs {
  double duplicate = 0;    // a push is sent twice: at once, or the copy later (a delayed duplicate)
  double lose_push = 0;    // a push is lost; the rank resends it later with the retransmit flag
  double late_push = 0;    // the rank pushes a segment of the previous round again
  double rerequest = 0;    // the rank asks for a result again: one segment or the chunk, this or the last round
  double lose_result = 0;  // a result the rank receives is lost: it must ask again or push again
  double hold_result = 0;  // a result is read later than it arrived (delayed on the way back)
  double misdirect = 0;    // a packet goes to the queue of an lcore that does not own its chunk
  double stall = 0;        // the rank stops for a while before its next push
  double pull = 0;         // ps: the rank pulls weights (a segment or the chunk)
  double init_again = 0;   // ps: rank 0 sends an init again
  double early_push = 0;   // ps: a rank other than 0 pushes before rank 0 has sent any init of the chunk
};

struct JobShape {
  config::Job job;
  Values values = Values::small_integers;
  uint32_t rounds = 1;  // rounds every chunk runs
  Knobs knobs;

  // Results checked bit for bit (else each element within the bound model.hpp states).
  [[nodiscard]] bool bit_exact() const noexcept { return values == Values::small_integers || job.deterministic; }
  [[nodiscard]] std::string describe() const;
};

struct EpochShape {
  uint16_t lcores = 1;
  uint32_t round_stall_ms = 50;
  std::vector<JobShape> jobs;

  [[nodiscard]] std::string describe() const;
};

// The IP MTU of the server's port (the harness's default): 352 fp32 or 704 bf16/fp16 elements a segment.
inline constexpr uint16_t kMtu = 1500;

// The chunk map of `job` on a server of `lcores` lcores, as server and workers derive it.
[[nodiscard]] proto::Layout layout_of(const config::Job& job, uint16_t lcores);

// The same (seed, epoch) always gives the same shape.
[[nodiscard]] EpochShape generate_epoch(uint64_t seed, uint64_t epoch);

}  // namespace phub::stress
