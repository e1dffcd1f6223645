// Names of the drop reasons, and sums of counter blocks (see counters.hpp).
#include "phub/engine/counters.hpp"

#include <algorithm>

namespace phub::engine {
namespace {

struct DropInfo {
  std::string_view name, help;
};
constexpr DropInfo kDrops[] = {
#define PHUB_X(name, help) {#name, help},
    PHUB_DROPS(PHUB_X)
#undef PHUB_X
};

template <size_t N>
void add_array(std::array<uint64_t, N>& into, const std::array<uint64_t, N>& from) noexcept {
  for (size_t i = 0; i < N; ++i) into[i] += load(from[i]);
}

}  // namespace

std::string_view drop_name(Drop d) noexcept {
  const auto i = static_cast<size_t>(d);
  return i < kDropCount ? kDrops[i].name : "unknown";
}

std::string_view message_slot_name(size_t slot) noexcept {
  return slot == 0 || slot >= kOpcodeSlots ? "other" : proto::opcode_name(static_cast<proto::Opcode>(slot));
}

std::string_view drop_help(Drop d) noexcept {
  const auto i = static_cast<size_t>(d);
  return i < kDropCount ? kDrops[i].help : "";
}

void accumulate(LcoreCounters& into, const LcoreCounters& from) noexcept {
  for (const auto& f : kLcoreFields) {
    const uint64_t v = load(from.*f.member);
    into.*f.member = is_max_counter(f.name) ? std::max(into.*f.member, v) : into.*f.member + v;
  }
  add_array(into.drops, from.drops);
  add_array(into.malformed, from.malformed);
  add_array(into.loop_gaps, from.loop_gaps);
  add_array(into.rx_messages, from.rx_messages);
  add_array(into.tx_messages, from.tx_messages);
}

void accumulate(JobCounters& into, const JobCounters& from) noexcept {
  for (const auto& f : kJobFields) into.*f.member += load(from.*f.member);
  add_array(into.drops, from.drops);
  add_array(into.round_latency, from.round_latency);
}

size_t latency_bucket(uint64_t us) noexcept {
  return static_cast<size_t>(std::lower_bound(kLatencyBoundsUs.begin(), kLatencyBoundsUs.end(), us) -
                             kLatencyBoundsUs.begin());
}

}  // namespace phub::engine
