// The checkpoint MAC and its key (docs/persistence.md, "Authenticity").
#include "mac.hpp"

#include <algorithm>

#include "phub/base/bytes.hpp"

namespace phub::persist {

static_assert(format::kMacBytes == sizeof(uint64_t));

CheckpointKey checkpoint_key(std::string_view secret, uint32_t job_id) {
  if (secret.empty()) return CheckpointKey{};
  std::array<unsigned char, 16> sub{};
  proto::derive_secret_subkey(secret, job_id, "phubckp1", sub);
  const auto* b = reinterpret_cast<const std::byte*>(sub.data());
  return CheckpointKey{load_le<uint64_t>(b), load_le<uint64_t>(b + 8)};
}

std::array<std::byte, format::kMacBytes> FileMac::finish() noexcept {
  std::array<std::byte, format::kMacBytes> tag{};
  store_le<uint64_t>(tag.data(), hasher_.finish());
  return tag;
}

bool file_mac_matches(const CheckpointKey& key, std::span<const std::byte> covered,
                      std::span<const std::byte, format::kMacBytes> tag) noexcept {
  FileMac mac(key);
  mac.update(covered);
  const auto want = mac.finish();
  // (Not secret: a reader learns nothing from how soon a guess fails that it could use offline.)
  return std::equal(want.begin(), want.end(), tag.begin());
}

}  // namespace phub::persist
