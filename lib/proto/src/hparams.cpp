// Hyperparameter sets: wire form, validation and id (hparams.hpp).
#include "phub/proto/hparams.hpp"

#include <bit>
#include <cmath>

#include "phub/base/bytes.hpp"
#include "phub/proto/auth.hpp"

namespace phub::proto {
namespace {

constexpr size_t kOffVersion = 0, kOffFamily = 1, kOffFlags = 2, kOffReserved8 = 3, kOffReserved32 = 4, kOffValues = 8;
constexpr uint8_t kFlagNesterov = 1;
// The id's key: public, fixed ("phub hparams id" in the first 15 bytes); the id is a name, not a secret.
constexpr AuthKey kIdKey{0x6870206275687000ULL, 0x64692073736d6172ULL};

void put_double(std::byte* p, double v) noexcept { store_be<uint64_t>(p, std::bit_cast<uint64_t>(v)); }
double get_double(const std::byte* p) noexcept { return std::bit_cast<double>(load_be<uint64_t>(p)); }

}  // namespace

HparamsWire encode_hparams(const Hparams& h) noexcept {
  HparamsWire w{};
  w[kOffVersion] = std::byte{kHparamsVersion};
  w[kOffFamily] = static_cast<std::byte>(h.family);
  w[kOffFlags] = std::byte{h.nesterov ? kFlagNesterov : uint8_t{0}};
  const double values[] = {h.lr, h.momentum, h.beta1, h.beta2, h.eps, h.weight_decay};
  for (size_t i = 0; i < 6; ++i) put_double(w.data() + kOffValues + 8 * i, values[i]);
  return w;
}

std::optional<Hparams> parse_hparams(std::span<const std::byte> payload) noexcept {
  if (payload.size() != kHparamsBytes) return std::nullopt;
  const std::byte* p = payload.data();
  const auto family = static_cast<uint8_t>(p[kOffFamily]);
  const auto flags = static_cast<uint8_t>(p[kOffFlags]);
  if (static_cast<uint8_t>(p[kOffVersion]) != kHparamsVersion || family > kHparamsFamilyMax ||
      (flags & ~kFlagNesterov) != 0 || p[kOffReserved8] != std::byte{0} || load_be<uint32_t>(p + kOffReserved32) != 0) {
    return std::nullopt;
  }
  Hparams h;
  h.family = static_cast<HparamsFamily>(family);
  h.nesterov = (flags & kFlagNesterov) != 0;
  double* fields[] = {&h.lr, &h.momentum, &h.beta1, &h.beta2, &h.eps, &h.weight_decay};
  for (size_t i = 0; i < 6; ++i) *fields[i] = get_double(p + kOffValues + 8 * i);
  if (!hparams_refusal(h).empty()) return std::nullopt;
  return h;
}

std::string hparams_refusal(const Hparams& h) {
  struct Named {
    const char* name;
    double value;
  };
  const Named all[] = {{"lr", h.lr}, {"momentum", h.momentum}, {"beta1", h.beta1}, {"beta2", h.beta2},
                       {"eps", h.eps}, {"weight_decay", h.weight_decay}};
  for (const auto& v : all) {
    if (!std::isfinite(v.value)) return std::string(v.name) + " is not finite";
    if (v.value < 0.0) return std::string(v.name) + " is negative";
  }
  const bool adam = h.family != HparamsFamily::sgd;
  if (adam) {
    if (h.beta1 >= 1.0) return "beta1 must be below 1";
    if (h.beta2 >= 1.0) return "beta2 must be below 1";
    if (h.momentum != 0.0 || h.nesterov) return "momentum and nesterov belong to SGD, not Adam";
  } else {
    if (h.beta1 != 0.0 || h.beta2 != 0.0 || h.eps != 0.0) return "betas and eps belong to Adam, not SGD";
    if (h.nesterov && h.momentum == 0.0) return "nesterov needs a momentum above 0";
  }
  return {};
}

uint64_t hparams_id(std::span<const std::byte, kHparamsBytes> wire) noexcept {
  const uint64_t id = siphash24(kIdKey, wire);
  return id == 0 ? 1 : id;
}

}  // namespace phub::proto
