// Formatting the schedule's last events for a failure report (see failure.hpp).
#include "failure.hpp"

#include <sstream>

#include "phub/proto/header.hpp"

namespace phub::stress {
namespace {

const char* kind_name(EventKind k) {
  static constexpr const char* kNames[] = {
      "push",      "push (lost)", "push again", "late push", "early push", "deferred copy of a push",
      "rerequest", "pull",        "init",       "init (lost)", "stall",    "result received",
      "held result read", "result lost", "result held back", "error received"};
  return kNames[static_cast<size_t>(k)];
}

}  // namespace

std::string EventLog::format() const {
  std::ostringstream o;
  const uint64_t first = next_ > kSize ? next_ - kSize : 0;
  for (uint64_t i = first; i < next_; ++i) {
    const Event& e = events_[i % kSize];
    o << "    tick " << e.tick << ": job [" << static_cast<int>(e.job) << "] rank " << e.rank << " " << kind_name(e.kind);
    if (e.kind == EventKind::stall) {
      o << " for " << e.round << " ms\n";
      continue;
    }
    if (e.kind == EventKind::error) {
      o << " " << proto::status_name(static_cast<proto::Status>(e.round)) << " chunk " << e.chunk << " seg " << e.seg
        << "\n";
      continue;
    }
    o << " chunk " << e.chunk << (e.seg == 0xffffffffU ? " (whole)" : " seg " + std::to_string(e.seg)) << " round "
      << e.round << " queue " << e.queue << "\n";
  }
  return o.str();
}

}  // namespace phub::stress
