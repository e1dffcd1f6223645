// Conversion of a copied config table into a Config, with every per-field rule (types, ranges, syntax).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phub/config/config.hpp"
#include "reader.hpp"
#include "value.hpp"

namespace phub::config::detail {

inline constexpr unsigned kMaxLcoreId = 127;     // RTE_MAX_LCORE - 1 of Debian's DPDK build
inline constexpr uint16_t kMaxWorkers = 1024;
inline constexpr uint64_t kMaxKeyElems = 1ull << 31;
inline constexpr uint64_t kMaxSizeBytes = 1ull << 50;  // 1 PiB: the ceiling of every size field

// The whole config; `root` is the table the script returned.
[[nodiscard]] Config convert(const Value& root, Errors& errors);

inline constexpr int64_t kMaxCheckpointIntervalS = 7 * 86400;  // a week
inline constexpr int64_t kMaxCheckpointsKept = 1000;

// One element of `jobs`; racks (already converted) order ranks_by_rack, limits give the quota default,
// checkpoints the defaults of a ps job's checkpoint.
[[nodiscard]] Job convert_job(const Value& v, const std::string& path, const Limits& limits,
                              const Checkpoints& checkpoints, const std::vector<Rack>& racks, Errors& errors);

// The fields of a `checkpoints` section or a job's `checkpoint` table, over the values already in `c`.
void convert_checkpoints(Record& r, Checkpoints& c);

// The cross-field rules (validate.cpp), appended to `errors`.
void validate_into(const Config& config, Errors& errors);

// Shared field rules.
void read_name(Record& r, std::string_view key, std::string& out);  // required; 1..128 of [A-Za-z0-9_.:/-]
[[nodiscard]] bool valid_name(std::string_view s);
// Which text forms an address field takes: "a.b.c.d", "a.b.c.d/len", or either (a bare address is /32).
enum class PrefixForm : uint8_t { bare, required, optional };
[[nodiscard]] std::optional<Ipv4Prefix> as_ipv4(const Value& v, std::string_view path, PrefixForm form,
                                                Errors& errors);

}  // namespace phub::config::detail
