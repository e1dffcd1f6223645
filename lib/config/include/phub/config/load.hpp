// Loading a Lua config file into a validated Config: the public entry points of lib/config.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/config/config.hpp"

namespace phub::config {

// What a config script may consume. Exceeding any limit is fatal to the load (pcall cannot catch it).
struct LoadLimits {
  uint64_t max_instructions = 50'000'000;  // Lua VM instructions, plus the charged work of C library loops
  size_t max_memory_bytes = 64u << 20;     // everything the Lua state allocates
  uint32_t max_wall_ms = 5000;             // wall-clock backstop for costly single instructions; 0 = none
  size_t max_values = 1'000'000;           // values copied out of the returned table (keys included)
};

// Runs the file in a sandboxed Lua state and converts and validates the table it returns.
// Errors name the file and line (script errors) or the field path, the bad value and the rule.
[[nodiscard]] Expected<Config, std::string> load_file(const std::string& path, const LoadLimits& limits = {});

// The same for text already in memory; chunkname names it in messages (e.g. "phub.lua").
[[nodiscard]] Expected<Config, std::string> load_string(std::string_view text, std::string_view chunkname,
                                                        const LoadLimits& limits = {});

// The text of config/phub.lua, compiled into the library.
[[nodiscard]] std::string_view embedded_default();

// The cross-field rules (unique names and ids, references, port ranges, racks) on a converted Config.
// load_* run it already; per-field ranges are checked while converting. Errors are one per line.
[[nodiscard]] Expected<void, std::string> validate(const Config& config);

// A short human summary, a few lines, for logs.
[[nodiscard]] std::string describe(const Config& config);

// What dump_lua writes for a job's secret: the secret, or kRedactedSecret (which no config loads: the
// loader refuses it by name, so that a redacted dump never runs a job under a known secret).
enum class Secrets { shown, redacted };
inline constexpr std::string_view kRedactedSecret = "<redacted: give the job's secret>";

// Lua text that loads back to an equal Config (every field written out; with Secrets::redacted, every
// non-empty secret replaced).
[[nodiscard]] std::string dump_lua(const Config& config, Secrets secrets = Secrets::shown);

}  // namespace phub::config
