// The anti-replay window: extended sequence number inference, check, and commit.
#include "phub/proto/replay_window.hpp"

namespace phub::proto {
namespace {

constexpr size_t word_of(uint64_t seq) noexcept { return static_cast<size_t>(seq / 64 % ReplayWindow::kWords); }
constexpr uint64_t bit_of(uint64_t seq) noexcept { return uint64_t{1} << (seq % 64); }

}  // namespace

std::string_view replay_name(Replay r) noexcept {
  switch (r) {
    case Replay::fresh: return "fresh";
    case Replay::replayed: return "replayed";
    case Replay::too_old: return "too_old";
  }
  return "unknown";
}

uint64_t ReplayWindow::infer(uint32_t low) const noexcept {
  const auto top_low = static_cast<uint32_t>(top_);
  const auto top_high = static_cast<uint32_t>(top_ >> 32);
  const auto bottom_low = static_cast<uint32_t>(top_low - (kSpan - 1));  // modulo 2^32
  uint32_t high = top_high;
  if (top_low >= kSpan - 1) {
    // The window lies within one 2^32 block: a low half below its bottom belongs to the next block.
    if (low < bottom_low) ++high;
  } else if (low >= bottom_low && top_high != 0) {
    // The window straddles the start of the block: a low half at or above its bottom belongs to the block
    // before (when there is one; at the very start it is a number ahead).
    --high;
  }
  return (static_cast<uint64_t>(high) << 32) | low;
}

Replay ReplayWindow::check(uint64_t seq) const noexcept {
  if (seq > top_) return Replay::fresh;
  if (top_ - seq >= kSpan) return Replay::too_old;
  return (words_[word_of(seq)] & bit_of(seq)) != 0 ? Replay::replayed : Replay::fresh;
}

Replay ReplayWindow::commit(uint64_t seq) noexcept {
  const Replay verdict = check(seq);
  if (verdict != Replay::fresh) return verdict;
  if (seq > top_) {
    // Clear the words that the numbers between the old top's word and seq's word take over.
    const uint64_t from = top_ / 64 + 1, to = seq / 64;
    const uint64_t entered = to >= from ? to - from + 1 : 0;  // words the window moves into
    if (entered >= kWords) {
      words_.fill(0);
    } else {
      for (uint64_t w = from; w <= to; ++w) words_[w % kWords] = 0;
    }
    top_ = seq;
  }
  words_[word_of(seq)] |= bit_of(seq);
  return verdict;
}

}  // namespace phub::proto
