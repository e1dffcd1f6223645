// Emulated ranks' progress per chunk (see progress.hpp).
#include "progress.hpp"

#include <algorithm>

namespace phub::stress {

int64_t ChunkState::min_round() const noexcept {
  int64_t r = ranks.front().round;
  for (const auto& rc : ranks) r = std::min(r, rc.round);
  return r;
}

int64_t ChunkState::max_round() const noexcept {
  int64_t r = ranks.front().round;
  for (const auto& rc : ranks) r = std::max(r, rc.round);
  return r;
}

bool ChunkState::all_sent(int64_t round, uint32_t seg) const noexcept {
  return std::all_of(ranks.begin(), ranks.end(), [&](const RankChunk& rc) {
    return rc.round > round || (rc.round == round && (rc.segs[seg] & kSent) != 0);
  });
}

JobProgress::JobProgress(const proto::Layout& layout, uint16_t workers)
    : chunks(layout.chunk_count()), stalled_until(workers) {
  for (uint32_t c = 0; c < layout.chunk_count(); ++c) {
    ChunkState& ch = chunks[c];
    ch.segments = layout.chunk(c).segments;
    ch.ranks.resize(workers);
    for (auto& rc : ch.ranks) rc.segs.assign(ch.segments, 0);
    ch.init.assign(ch.segments, 0);
    ch.pull_answers.assign(static_cast<size_t>(workers) * ch.segments, 0);
    ch.early.assign(static_cast<size_t>(workers) * ch.segments, 0);
  }
}

}  // namespace phub::stress
