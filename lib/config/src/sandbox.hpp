// The sandboxed Lua state that runs a config script within LoadLimits (time, memory, no os/io/require).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/config/load.hpp"
#include "value.hpp"

struct lua_State;

namespace phub::config::detail {

// Which limit a script ran into. Once set it stays set, and every later check raises again.
enum class Hit : uint8_t { none, memory, instructions, time };

// Work that is proportional to a length is charged one unit per this many bytes.
inline constexpr uint64_t kBytesPerUnit = 16;

// A file being run by a config load: the config itself (outermost), or one it included.
struct IncludeFile {
  std::string id;         // its canonical path: a file already being run cannot be included again (a cycle)
  std::string dir;        // canonical directory its own includes are resolved against
  std::string display;    // its name in messages: the config's path as given, then the include paths below it
  std::string chunkname;  // "@" + display
  std::string text;       // the text until it is parsed
};

// What `include` works with. Only a config loaded from a file has one (load_file); include() in text
// loaded from memory is an error.
struct Includes {
  std::string root;               // canonical directory of the config: every included file lies below it
  std::vector<IncludeFile> open;  // the files being run, the config first
  unsigned count = 0;             // files included so far in this load
  std::string message;  // scratch for the message of a refused include (no C++ temporaries across Lua errors)
  std::string wrapped;  // the last error message include() wrapped: outer includes pass it on unchanged
};

inline constexpr size_t kMaxIncludeBytes = 1u << 20;  // an included file's size (also at most the memory limit)
inline constexpr size_t kMaxIncludeDepth = 8;         // files included below the config, nested
inline constexpr unsigned kMaxIncludes = 64;          // files included in one load
inline constexpr size_t kMaxIncludePath = 1024;       // bytes of an include path

// Accounting shared by the allocator, the count hook and the library wrappers of one state.
struct Budget {
  LoadLimits limits;
  lua_State* L = nullptr;
  size_t used_bytes = 0;
  uint64_t instructions = 0;
  std::chrono::steady_clock::time_point deadline;
  Hit hit = Hit::none;
  std::string first_message;  // the first limit error, with the script position where known
  // While the script is parsed and run, the allocator checks the clock (every kAllocsPerCheck-th and
  // every large allocation) and fails an allocation once the deadline passed.
  bool armed = false;
  uint32_t allocs = 0;
  size_t largest_string = 0;     // bytes of the longest string the state made so far
  uint32_t hook_interval = 1;    // instructions between two runs of the count hook
  Includes* includes = nullptr;  // set for a config loaded from a file

  [[nodiscard]] std::string limit_text() const;  // "config script exceeded N ..." for `hit`
};

// The Budget of a state made by LuaState.
Budget& budget_of(lua_State* L);

// Charges `units` of work to the instruction budget; raises a Lua error if a limit is (or was) exceeded
// or the deadline passed. Every library function a script can call charges before it works, and those
// that loop charge as they go: each call is a clock check.
void charge(lua_State* L, uint64_t units);

// charge() for work done all at once by a C function that cannot check the clock while it runs: it is
// also refused (as a time-limit hit) when `units` at kNsPerUnitWorst would end past the deadline.
void charge_upfront(lua_State* L, uint64_t units);
inline constexpr uint64_t kNsPerUnitWorst = 10;

// If a limit was hit, raises it again: for wrappers of functions that catch errors (pcall, load).
void reraise_if_hit(lua_State* L);

// Installs the safe libraries and the charging wrappers into a fresh state (a lua_CFunction, run protected).
int open_sandbox(lua_State* L);

// include(path): runs a file below the config's directory in this state and returns its value (include.cpp).
int sandbox_include(lua_State* L);

// Loads a text chunk, handing it to the parser in pieces with a charge (a clock check) before each, so a
// huge chunk cannot keep the parser busy past the deadline. Leaves the function or an error message.
int load_text_chunk(lua_State* L, const char* text, size_t size, const char* chunkname);

// Copies the value at `index` (a table) out of the state, within limits.max_values values and
// limits.max_memory_bytes bytes of strings. Uses only raw, non-allocating accesses: runs no Lua code.
[[nodiscard]] Expected<Value, std::string> copy_out(lua_State* L, int index, const LoadLimits& limits);

// Runs `text` (a text chunk only) and copies out the table it returns.
// `chunkname` is Lua's: "@path" for files, "=name" otherwise; `display` prefixes messages without a position.
// `includes` (a file's, or null) lets the script call include(); it must outlive the call.
[[nodiscard]] Expected<Value, std::string> run_script(std::string_view text, const std::string& chunkname,
                                                      std::string_view display, const LoadLimits& limits,
                                                      Includes* includes = nullptr);

}  // namespace phub::config::detail
