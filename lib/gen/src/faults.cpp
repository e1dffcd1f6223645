// Making bad packets out of good ones.
#include "phub/gen/faults.hpp"

#include <array>

#include "phub/base/bytes.hpp"
#include "phub/proto/frame.hpp"

namespace phub::gen {
namespace {

constexpr size_t kHdr = proto::kEthBytes + proto::kIpv4Bytes + proto::kUdpBytes;  // phub header offset

struct FaultInfo {
  Fault fault;
  std::string_view name;
  std::string_view counter;
};

constexpr std::array<FaultInfo, kFaultCount> kFaults{{
    {Fault::bad_tag, "bad_tag", "bad_tag"},
    {Fault::foreign_rank, "foreign_rank", "bad_rank"},
    {Fault::unknown_job, "unknown_job", "unknown_job"},
    {Fault::truncated, "truncated", "malformed_ipv4_bad_total_length"},
    {Fault::lying_length, "lying_length", "malformed_payload_length_mismatch"},
    {Fault::bad_dtype, "bad_dtype", "malformed_bad_dtype"},
    {Fault::huge_count, "huge_count", "malformed_elem_count_mismatch"},
    {Fault::bad_opcode, "bad_opcode", "malformed_bad_opcode"},
    {Fault::wrong_opcode, "wrong_opcode", "unexpected_opcode"},
    {Fault::future_round, "future_round", "round_ahead"},
}};

void resign(std::span<std::byte> frame, const proto::AuthKey* key) noexcept {
  if (key != nullptr) proto::sign_header(*key, frame.subspan<kHdr, proto::kHeaderBytes>());
}

}  // namespace

std::string_view fault_name(Fault f) noexcept { return kFaults[static_cast<size_t>(f)].name; }

std::string_view fault_server_counter(Fault f) noexcept { return kFaults[static_cast<size_t>(f)].counter; }

std::optional<Fault> parse_fault(std::string_view name) noexcept {
  for (const auto& i : kFaults) {
    if (i.name == name) return i.fault;
  }
  return std::nullopt;
}

size_t corrupt(Fault f, std::span<std::byte> frame, size_t len, const FaultJob& job) noexcept {
  const proto::AuthKey* key = job.key;
  std::byte* h = frame.data() + kHdr;
  switch (f) {
    case Fault::bad_tag:
      h[47] ^= std::byte{0x5a};  // last byte of the 64-bit tag
      break;
    case Fault::foreign_rank:
      store_be<uint16_t>(h + 12, static_cast<uint16_t>(job.workers + 7));
      resign(frame, key);
      break;
    case Fault::unknown_job:
      store_be<uint32_t>(h + 8, 0x7ead0000u ^ load_be<uint32_t>(h + 8));
      resign(frame, key);
      break;
    case Fault::truncated:
      return kHdr + 20;
    case Fault::lying_length:
      store_be<uint16_t>(h + 14, static_cast<uint16_t>(load_be<uint16_t>(h + 14) - 2));
      break;
    case Fault::bad_dtype:
      h[6] = std::byte{9};
      break;
    case Fault::huge_count:
      store_be<uint16_t>(h + 28, 0xffff);
      break;
    case Fault::bad_opcode:
      h[3] = std::byte{0xee};
      break;
    case Fault::wrong_opcode:
      h[3] = static_cast<std::byte>(proto::Opcode::result);
      resign(frame, key);
      break;
    case Fault::future_round:
      store_be<uint32_t>(h + 16, job.round_modulus == 0 ? load_be<uint32_t>(h + 16) + 2
                                                        : (load_be<uint32_t>(h + 16) + 2) % job.round_modulus);
      resign(frame, key);
      break;
    case Fault::count_:
      break;
  }
  return len;
}

}  // namespace phub::gen
