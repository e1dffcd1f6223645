// The published view of an lcore's sessions, for the lcores that hand it frames.
#include "phub/engine/session_board.hpp"

#include "phub/base/bytes.hpp"
#include "phub/engine/lcore_job.hpp"

namespace phub::engine {
namespace {

uint64_t pack_reply(const proto::ReplyAddress& r) noexcept { return uint64_t{r.ipv4} << 16 | r.udp_port; }

proto::ReplyAddress unpack_reply(uint64_t v) noexcept {
  return proto::ReplyAddress{static_cast<uint32_t>(v >> 16), static_cast<uint16_t>(v)};
}

}  // namespace

SessionBoard::SessionBoard(uint16_t ranks) : ranks_(ranks), slots_(new Slot[ranks]) {}

void SessionBoard::publish(uint16_t rank, const PeerSession& current, const PeerSession& former) noexcept {
  Slot& s = slots_[rank];
  const uint32_t v = s.version.load(std::memory_order_relaxed);
  s.version.store(v + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const PeerSession* sessions[2] = {&current, &former};
  for (int i = 0; i < 2; ++i) {
    const PeerSession& p = *sessions[i];
    s.k0[i].store(p.keys.worker_tag.k0, std::memory_order_relaxed);
    s.k1[i].store(p.keys.worker_tag.k1, std::memory_order_relaxed);
    s.reply[i].store(p.valid ? pack_reply(p.reply) : 0, std::memory_order_relaxed);
    s.high[i].store(proto::seq_high(p.window.top()), std::memory_order_relaxed);
  }
  s.version.store(v + 2, std::memory_order_release);
}

void SessionBoard::publish_high(uint16_t rank, bool former, uint32_t high) noexcept {
  slots_[rank].high[former ? 1 : 0].store(high, std::memory_order_relaxed);  // one word: no lock needed
}

bool SessionBoard::tag_matches(uint16_t rank, std::span<const std::byte, proto::kHeaderBytes> wire) const noexcept {
  if (rank >= ranks_) return false;
  const Slot& s = slots_[rank];
  proto::AuthKey keys[2];
  uint64_t replies[2];
  uint32_t highs[2];
  for (;;) {
    const uint32_t v = s.version.load(std::memory_order_acquire);
    if ((v & 1) != 0) continue;  // the owner is writing: a few stores
    for (int i = 0; i < 2; ++i) {
      keys[i] = proto::AuthKey{s.k0[i].load(std::memory_order_relaxed), s.k1[i].load(std::memory_order_relaxed)};
      replies[i] = s.reply[i].load(std::memory_order_relaxed);
      highs[i] = s.high[i].load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.version.load(std::memory_order_relaxed) == v) break;
  }
  const uint64_t tag = load_be<uint64_t>(wire.data() + proto::kAuthTagOffset);
  for (int i = 0; i < 2; ++i) {
    if (replies[i] == 0) continue;
    for (uint32_t high : {highs[i], highs[i] + 1}) {
      if (proto::session_tag(keys[i], wire, unpack_reply(replies[i]), high) == tag) return true;
    }
  }
  return false;
}

}  // namespace phub::engine
