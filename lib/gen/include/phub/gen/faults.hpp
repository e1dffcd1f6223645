// Deliberately bad packets an emulated worker can inject, made from a valid push frame, and the server
// counter each one must land in (tests compare the two exactly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "phub/proto/auth.hpp"

namespace phub::gen {

enum class Fault : uint8_t {
  bad_tag,       // authentication tag of another key
  foreign_rank,  // a rank outside the job (correctly signed)
  unknown_job,   // a job id the server does not know
  truncated,     // the frame is cut inside the phub header (IPv4 total length still claims it all)
  lying_length,  // phub payload_bytes disagrees with the real payload
  bad_dtype,     // dtype 9
  huge_count,    // elem_count 65535
  bad_opcode,    // opcode 0xee
  wrong_opcode,  // a valid opcode a server never receives (result), correctly signed
  future_round,  // a valid push two rounds ahead: answered with error round_ahead, not dropped silently
  count_,
};

inline constexpr size_t kFaultCount = static_cast<size_t>(Fault::count_);

[[nodiscard]] std::string_view fault_name(Fault f) noexcept;
[[nodiscard]] std::optional<Fault> parse_fault(std::string_view name) noexcept;
// The name of the phub-server counter (exit report, "drops:" line) the fault increments.
[[nodiscard]] std::string_view fault_server_counter(Fault f) noexcept;

// What corrupting needs to know about the job.
struct FaultJob {
  uint16_t workers = 1;
  uint32_t round_modulus = 0;
  const proto::AuthKey* key = nullptr;  // signs headers that must pass authentication (null: no secret)
};

// Turn the valid push frame in frame[0..len) into fault `f` in place; returns the new length.
[[nodiscard]] size_t corrupt(Fault f, std::span<std::byte> frame, size_t len, const FaultJob& job) noexcept;

}  // namespace phub::gen
