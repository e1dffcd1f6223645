// The sandboxed Lua state that runs a config script within LoadLimits (time, memory, no os/io/require).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/config/load.hpp"
#include "value.hpp"

struct lua_State;

namespace phub::config::detail {

// Which limit a script ran into. Once set it stays set, and every later check raises again.
enum class Hit : uint8_t { none, memory, instructions, time };

// Accounting shared by the allocator, the count hook and the library wrappers of one state.
struct Budget {
  LoadLimits limits;
  size_t used_bytes = 0;
  uint64_t instructions = 0;
  std::chrono::steady_clock::time_point deadline;
  Hit hit = Hit::none;
  std::string first_message;  // the first limit error, with the script position where known

  [[nodiscard]] std::string limit_text() const;  // "config script exceeded N ..." for `hit`
};

// The Budget of a state made by LuaState.
Budget& budget_of(lua_State* L);

// Charges `units` of work to the instruction budget; raises a Lua error if a limit is (or was) exceeded.
void charge(lua_State* L, uint64_t units);

// If a limit was hit, raises it again: for wrappers of functions that catch errors (pcall, load).
void reraise_if_hit(lua_State* L);

// Installs the safe libraries and the charging wrappers into a fresh state (a lua_CFunction, run protected).
int open_sandbox(lua_State* L);

// Copies the value at `index` (a table) out of the state, within limits.max_values values and
// limits.max_memory_bytes bytes of strings. Uses only raw, non-allocating accesses: runs no Lua code.
[[nodiscard]] Expected<Value, std::string> copy_out(lua_State* L, int index, const LoadLimits& limits);

// Runs `text` (a text chunk only) and copies out the table it returns.
// `chunkname` is Lua's: "@path" for files, "=name" otherwise; `display` prefixes messages without a position.
[[nodiscard]] Expected<Value, std::string> run_script(std::string_view text, const std::string& chunkname,
                                                      std::string_view display, const LoadLimits& limits);

}  // namespace phub::config::detail
