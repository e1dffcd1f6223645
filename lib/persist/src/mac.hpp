// The checkpoint file's MAC: SipHash-2-4 under the job's checkpoint key of every byte before it, computed
// as the writer writes and checked by the reader after everything else.
#pragma once

#include <array>
#include <cstddef>
#include <span>

#include "format.hpp"
#include "phub/persist/checkpoint.hpp"
#include "phub/proto/auth.hpp"

namespace phub::persist {

class FileMac {
 public:
  explicit FileMac(const CheckpointKey& key) noexcept : hasher_(key) {}
  void update(std::span<const std::byte> bytes) noexcept { hasher_.update(bytes); }
  // The tag as stored: the 64-bit SipHash, little-endian.
  [[nodiscard]] std::array<std::byte, format::kMacBytes> finish() noexcept;

 private:
  proto::SipHasher hasher_;
};

// Whether `tag` is the MAC of `covered` under `key`.
[[nodiscard]] bool file_mac_matches(const CheckpointKey& key, std::span<const std::byte> covered,
                                    std::span<const std::byte, format::kMacBytes> tag) noexcept;

}  // namespace phub::persist
