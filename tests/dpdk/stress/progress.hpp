// What every emulated rank of a job holds and waits for, per chunk: the round it pushes and, per segment,
// whether it pushed, put on the wire and received the result; rank 0's init progress (ps); and the
// answers owed to ranks that a received packet is matched against (pull and init answers, early pushes
// that may be refused, requests for old rounds that may get a round error).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "phub/proto/layout.hpp"

namespace phub::stress {

// Per segment of a rank's current round (and of rank 0's inits).
enum SegBits : uint8_t {
  kPushed = 1,  // the rank has pushed it (the packet may have been lost)
  kSent = 2,    // a push of it went on the wire: the server may count it
  kGot = 4,     // the rank holds its result (inits: the acknowledgement)
};

struct RankChunk {
  int64_t round = 0;              // the round this rank pushes; it holds every result of round - 1
  std::vector<uint8_t> segs;      // SegBits of `round`, by segment
  uint32_t got = 0;               // segments with kGot
  std::chrono::steady_clock::time_point recover_at{};  // the earliest time it may recover a missing result
  uint64_t rounds_sent = 0;       // bit r: the rank sent a push or rerequest of this chunk labelled round r
};

struct ChunkState {
  uint32_t segments = 0;
  std::vector<RankChunk> ranks;
  uint16_t ranks_done = 0;        // ranks that hold the last round's every result
  // ps: rank 0's init of each segment (SegBits; kGot: acknowledged), and whether any was sent.
  std::vector<uint8_t> init;
  uint32_t init_acks = 0;
  bool init_started = false;
  // [rank * segments + seg]: pulls and inits sent, which an answer labelled -1 (the initial weights, no
  // round's result) must be one of; early pushes that may come back not_initialized.
  std::vector<uint16_t> pull_answers;
  std::vector<uint16_t> early;

  [[nodiscard]] int64_t min_round() const noexcept;
  [[nodiscard]] int64_t max_round() const noexcept;
  [[nodiscard]] bool initialized(bool ps) const noexcept { return !ps || init_acks == segments; }
  // Whether every rank has put a push of `seg` of `round` on the wire (its result is due).
  [[nodiscard]] bool all_sent(int64_t round, uint32_t seg) const noexcept;
  [[nodiscard]] size_t at(uint16_t rank, uint32_t seg) const noexcept {
    return static_cast<size_t>(rank) * segments + seg;
  }
};

struct JobProgress {
  JobProgress(const proto::Layout& layout, uint16_t workers);

  std::vector<ChunkState> chunks;
  std::vector<std::chrono::steady_clock::time_point> stalled_until;  // by rank
  uint32_t chunks_done = 0;
  bool long_stall_taken = false;  // a rank stalled longer than round_stall_ms (once per job and epoch)

  [[nodiscard]] bool done() const noexcept { return chunks_done == chunks.size(); }
};

}  // namespace phub::stress
