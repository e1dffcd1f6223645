// One job's synthetic workload: the chunk map, every worker's push payloads (wire bytes, one per pattern),
// their rank-order fp32 sums, and the expected allreduce results. Built once; read-only afterwards.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "phub/agg/kernels.hpp"
#include "phub/base/expected.hpp"
#include "phub/gen/job_spec.hpp"
#include "phub/gen/values.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/hparams.hpp"
#include "phub/proto/layout.hpp"

namespace phub::gen {

// The hyperparameter set of a job's own configured optimizer (what the server applies without one).
[[nodiscard]] proto::Hparams hparams_of(const agg::OptimizerParams& o);

class Workload {
 public:
  // `ip_mtu` fixes the segment size exactly as the server derives it (proto::segment_elems).
  [[nodiscard]] static Expected<Workload, std::string> build(const JobSpec& spec, uint16_t ip_mtu);

  [[nodiscard]] const JobSpec& spec() const noexcept { return spec_; }
  [[nodiscard]] const proto::Layout& layout() const noexcept { return layout_; }
  [[nodiscard]] uint32_t segment_elems() const noexcept { return seg_elems_; }
  [[nodiscard]] Dtype out_dtype() const noexcept { return spec_.dtype; }
  [[nodiscard]] size_t in_bytes() const noexcept { return dtype_bytes(spec_.dtype); }
  [[nodiscard]] const proto::AuthKey& key() const noexcept { return key_; }
  // ps with spec().hparams: the hyperparameter set its pushes name, and the 8-byte tail that names it (empty
  // otherwise). Pushes carry the tail, inits not.
  [[nodiscard]] const proto::HparamsWire& hparams() const noexcept { return hparams_; }
  [[nodiscard]] std::span<const std::byte> push_tail() const noexcept {
    return std::span<const std::byte>(tail_.data(), spec_.hparams ? tail_.size() : 0);
  }
  [[nodiscard]] bool authenticated() const noexcept { return !spec_.secret.empty(); }
  // Whether headers carry the job key's tag: a session job's carry the session's instead, sealed by the sender.
  [[nodiscard]] bool signs_with_job_key() const noexcept { return authenticated() && !spec_.sessions; }
  // The job's epoch on server lcore `owner`, which every packet to it carries: 0 (a fresh server's) unless the
  // session handshake started another (set before any frame is built).
  [[nodiscard]] uint16_t epoch(uint16_t owner) const noexcept { return owner < epochs_.size() ? epochs_[owner] : 0; }
  void set_epoch(uint16_t owner, uint16_t epoch);
  [[nodiscard]] uint64_t segments_total() const noexcept { return segments_total_; }

  // Wire bytes of `rank`'s push of pattern k, the first `elems` elements (a segment prefix).
  [[nodiscard]] std::span<const std::byte> push_bytes(uint32_t k, uint16_t rank, uint32_t elems) const noexcept {
    return {pushes_.data() + (static_cast<size_t>(k) * spec_.workers + rank) * seg_bytes(), elems * in_bytes()};
  }
  // CRC32C of a whole-segment push (the common case; shorter segments compute theirs).
  [[nodiscard]] uint32_t push_crc(uint32_t k, uint16_t rank) const noexcept {
    return push_crcs_[static_cast<size_t>(k) * spec_.workers + rank];
  }
  // fp32 sum of every rank's push of pattern k, added in rank order (what a deterministic server computes).
  [[nodiscard]] std::span<const float> sum(uint32_t k) const noexcept {
    return {sums_.data() + static_cast<size_t>(k) * seg_elems_, seg_elems_};
  }
  // Expected allreduce result of pattern k (sum or mean, narrowed to the job's dtype), `elems` elements.
  [[nodiscard]] std::span<const std::byte> allreduce_result(uint32_t k, uint32_t elems) const noexcept {
    return {results_.data() + static_cast<size_t>(k) * seg_bytes(), elems * in_bytes()};
  }
  // ps: rank 0's initial weights of a segment, pattern init_pattern(chunk, seg), in the job's dtype (a
  // segment of a 16-bit job would not fit one packet in fp32).
  [[nodiscard]] std::span<const std::byte> init_bytes(uint32_t k, uint32_t elems) const noexcept {
    return {inits_.data() + static_cast<size_t>(k) * seg_bytes(), elems * in_bytes()};
  }
  [[nodiscard]] static uint32_t init_pattern(uint32_t chunk, uint32_t seg) noexcept {
    return (chunk + 2 * seg) % kPatterns;
  }
  [[nodiscard]] float grad_scale() const noexcept {
    return spec_.mean ? 1.0f / static_cast<float>(spec_.workers) : 1.0f;
  }
  // Every push template and every init payload, each one contiguous block (for copying them into memory a
  // NIC can read: payload spans above point inside these blocks).
  [[nodiscard]] std::span<const std::byte> push_block() const noexcept { return pushes_; }
  [[nodiscard]] std::span<const std::byte> init_block() const noexcept { return inits_; }
  // Wire round of a logical (ever-increasing) round.
  [[nodiscard]] uint32_t wire_round(uint64_t logical) const noexcept {
    return spec_.round_modulus == 0 ? static_cast<uint32_t>(logical)
                                    : static_cast<uint32_t>(logical % spec_.round_modulus);
  }
  // The wire round of a ps init acknowledgement: the round before the first (results are labelled with the
  // round whose state they hold, and initial weights are the state before round 0).
  [[nodiscard]] uint32_t init_ack_round() const noexcept {
    return spec_.round_modulus == 0 ? UINT32_MAX : spec_.round_modulus - 1;
  }
  // The logical round of a wire round at most half the modulus before `reference` (a round in flight).
  [[nodiscard]] uint64_t logical_round(uint32_t wire, uint64_t reference) const noexcept;

 private:
  [[nodiscard]] size_t seg_bytes() const noexcept { return seg_elems_ * in_bytes(); }

  JobSpec spec_;
  proto::Layout layout_;
  proto::AuthKey key_;
  proto::HparamsWire hparams_{};
  std::array<std::byte, proto::kTailBytes> tail_{};
  uint32_t seg_elems_ = 0;
  uint64_t segments_total_ = 0;
  std::vector<std::byte> pushes_;    // [k][rank][seg_bytes]
  std::vector<uint32_t> push_crcs_;  // [k][rank]
  std::vector<float> sums_;          // [k][seg_elems]
  std::vector<std::byte> results_;   // [k][seg_bytes]
  std::vector<std::byte> inits_;     // [k][seg_bytes]
  std::vector<uint16_t> epochs_;     // by server lcore; empty: all 0
};

// The scalar kernels: bit-identical to the SIMD ones the server picks (lib/agg's determinism contract).
[[nodiscard]] const agg::Kernels& reference_kernels() noexcept;

}  // namespace phub::gen
