// The agent's limits on what a control command may ask for.
#include "control.hpp"

#include "probe_body.hpp"

namespace phub::probe {
namespace {

std::string outside(const char* what, uint64_t v, uint64_t lo, uint64_t hi) {
  return std::string(what) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi);
}

}  // namespace

std::string probe_refusal(const ProbeParams& p) {
  using L = Limits;
  if (p.count < 1 || p.count > L::kMaxSamples) return outside("count", p.count, 1, L::kMaxSamples);
  if (p.interval_us < L::kMinIntervalUs || p.interval_us > L::kMaxIntervalUs)
    return outside("interval_us", p.interval_us, L::kMinIntervalUs, L::kMaxIntervalUs);
  if (p.timeout_us < L::kMinTimeoutUs || p.timeout_us > L::kMaxTimeoutUs)
    return outside("timeout_us", p.timeout_us, L::kMinTimeoutUs, L::kMaxTimeoutUs);
  if (p.payload_bytes < kMinBodyBytes || p.payload_bytes > kMaxBodyBytes)
    return outside("payload_bytes", p.payload_bytes, kMinBodyBytes, kMaxBodyBytes);
  if (p.give_up_after > p.count) return outside("give_up_after", p.give_up_after, 0, p.count);
  const uint64_t worst_us = uint64_t{p.count} * (uint64_t{p.interval_us} + p.timeout_us);
  if (worst_us > L::kMaxProbeUs)
    return "count x (interval_us + timeout_us) = " + std::to_string(worst_us) + " us is above " +
           std::to_string(L::kMaxProbeUs) + " us";
  return {};
}

std::string bulk_refusal(uint64_t bytes) {
  if (bytes < 1 || bytes > Limits::kMaxBulkBytes) return outside("bytes", bytes, 1, Limits::kMaxBulkBytes);
  return {};
}

}  // namespace phub::probe
