// Test helpers: lengths, guarded misaligned buffers, random inputs, ISA parameterisation.
#include "support.hpp"

#include <cstring>

#include "reference.hpp"

namespace phub::agg::test {

std::vector<size_t> test_lengths() {
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 64; ++n) lengths.push_back(n);
  for (size_t n : {127U, 1000U, 2049U, 4099U, 8192U}) lengths.push_back(n);
  return lengths;
}

Buffer::Buffer(size_t bytes, size_t offset) : storage_(bytes + offset + 64 + kGuardBytes), bytes_(bytes) {
  auto addr = reinterpret_cast<uintptr_t>(storage_.data());
  const size_t pad = (64 - addr % 64) % 64;
  data_ = storage_.data() + pad + offset;
  std::memset(data_ + bytes_, 0xa5, kGuardBytes);
}

bool Buffer::guard_intact() const {
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (data_[bytes_ + i] != std::byte{0xa5}) return false;
  }
  return true;
}

namespace {

void put16(std::byte* p, uint16_t h) {
  p[0] = static_cast<std::byte>(h & 0xff);
  p[1] = static_cast<std::byte>(h >> 8);
}

uint32_t special_fp32(std::mt19937& rng) {
  static constexpr uint32_t kSpecials[] = {0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001, 0x80000000,
                                           0x00000001, 0x807fffff, 0x7f7fffff, 0x00800000, 0x477ff000, 0x33000000};
  return kSpecials[rng() % std::size(kSpecials)];
}

}  // namespace

void fill_random(std::byte* p, Dtype d, size_t n, std::mt19937& rng, bool specials) {
  std::uniform_int_distribution<uint32_t> mant(0, (1U << 23) - 1);
  std::uniform_int_distribution<uint32_t> exp_fp32(127 - 20, 127 + 20);
  std::uniform_int_distribution<uint32_t> exp_fp16(0, 30);
  std::uniform_int_distribution<uint32_t> exp_bf16(127 - 30, 127 + 30);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t sign = rng() & 1U;
    const bool special = specials && rng() % 8 == 0;
    switch (d) {
      case Dtype::fp32: {
        const uint32_t bits = special ? special_fp32(rng) : (sign << 31) | (exp_fp32(rng) << 23) | mant(rng);
        std::memcpy(p + 4 * i, &bits, 4);
        break;
      }
      case Dtype::fp16: {
        const uint32_t bits = special ? rng() & 0xffff : (sign << 15) | (exp_fp16(rng) << 10) | (mant(rng) & 0x3ff);
        put16(p + 2 * i, static_cast<uint16_t>(bits));
        break;
      }
      case Dtype::bf16: {
        const uint32_t bits = special ? rng() & 0xffff : (sign << 15) | (exp_bf16(rng) << 7) | (mant(rng) & 0x7f);
        put16(p + 2 * i, static_cast<uint16_t>(bits));
        break;
      }
    }
  }
}

std::vector<OptimizerConfig> optimizer_configs() {
  std::vector<OptimizerConfig> out;
  for (const float wd : {0.0F, 0.01F}) {
    const std::string suffix = wd == 0.0F ? "" : "+wd";
    out.push_back({"sgd" + suffix, {.kind = OptimizerKind::sgd, .lr = 0.1F, .weight_decay = wd}});
    out.push_back({"momentum" + suffix,
                   {.kind = OptimizerKind::momentum, .lr = 0.05F, .momentum = 0.9F, .weight_decay = wd}});
    out.push_back({"nesterov" + suffix,
                   {.kind = OptimizerKind::nesterov, .lr = 0.05F, .momentum = 0.8F, .weight_decay = wd}});
    out.push_back({"adam" + suffix, {.kind = OptimizerKind::adam, .lr = 0.01F, .beta1 = 0.9F, .beta2 = 0.999F,
                                     .eps = 1e-8F, .weight_decay = wd}});
  }
  out.push_back({"adamw", {.kind = OptimizerKind::adam, .lr = 0.01F, .weight_decay = 0.05F, .adamw = true}});
  out.push_back({"adam-eps-large",
                 {.kind = OptimizerKind::adam, .lr = 0.003F, .beta1 = 0.5F, .beta2 = 0.75F, .eps = 0.1F}});
  return out;
}

void IsaTest::SetUp() {
  if (!isa_supported(GetParam())) GTEST_SKIP() << "this CPU does not support " << isa_name(GetParam());
  k_ = &kernels_for(GetParam());
}

std::string isa_param_name(const ::testing::TestParamInfo<Isa>& info) { return std::string(isa_name(info.param)); }

}  // namespace phub::agg::test
