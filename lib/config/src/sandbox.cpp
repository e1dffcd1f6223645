// The sandboxed Lua state: capped allocator, instruction/deadline hook, and running a config script.
#include "sandbox.hpp"

#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include "reader.hpp"

namespace phub::config::detail {
namespace {

constexpr size_t kMaxErrorBytes = 200;  // a script's error message is cut to this, then "... (N bytes)"
constexpr size_t kChunkPiece = 64u << 10;  // the parser gets a text chunk in pieces this large

constexpr uint32_t kAllocsPerCheck = 1024;        // the allocator reads the clock this often...
constexpr size_t kLargeAllocation = 256u << 10;    // ...and before every allocation this large
// Between two runs of the count hook the VM may run this many bytes' worth of string work (a comparison
// or a number conversion reads a whole string in one instruction): the hook runs more often once the
// state holds long strings.
constexpr size_t kHookBytes = 64u << 20;
constexpr uint32_t kMaxHookInterval = 1000;

uint32_t hook_interval_for(const Budget& b) {
  uint64_t by_instructions = std::clamp<uint64_t>(b.limits.max_instructions, 1, kMaxHookInterval);
  uint64_t by_strings = kHookBytes / std::max<size_t>(b.largest_string, 1);
  return static_cast<uint32_t>(std::clamp<uint64_t>(std::min(by_instructions, by_strings), 1, kMaxHookInterval));
}

void count_hook(lua_State* L, lua_Debug* /*ar*/);

bool past_deadline(const Budget& b) {
  return b.limits.max_wall_ms != 0 && std::chrono::steady_clock::now() > b.deadline;
}

// The allocator of a sandboxed state: refuses to grow past the memory limit, and refuses every growth
// once a limit was hit so that a caught error cannot be retried. While armed it is also a clock check:
// after the deadline it fails the allocation (Lua raises a memory error, reported as the time limit).
// Shrinking never fails.
void* capped_alloc(void* ud, void* ptr, size_t osize, size_t nsize) {
  auto* b = static_cast<Budget*>(ud);
  size_t old_bytes = ptr != nullptr ? osize : 0;
  if (nsize == 0) {
    std::free(ptr);
    b->used_bytes -= old_bytes;
    return nullptr;
  }
  if (nsize > old_bytes) {
    size_t room = b->limits.max_memory_bytes - std::min(b->used_bytes, b->limits.max_memory_bytes);
    if (b->hit != Hit::none) return nullptr;
    if (nsize - old_bytes > room) {
      b->hit = Hit::memory;
      return nullptr;
    }
    if (b->armed && (++b->allocs % kAllocsPerCheck == 0 || nsize >= kLargeAllocation) && past_deadline(*b)) {
      b->hit = Hit::time;
      return nullptr;
    }
  }
  void* p = std::realloc(ptr, nsize);
  if (p == nullptr) return nullptr;
  b->used_bytes = b->used_bytes - old_bytes + nsize;
  // For a new object osize is its type: keep the count hook frequent enough for the longest string.
  if (ptr == nullptr && osize == LUA_TSTRING && nsize > b->largest_string) {
    b->largest_string = nsize;
    uint32_t interval = hook_interval_for(*b);
    if (b->armed && interval < b->hook_interval) {
      b->hook_interval = interval;
      lua_sethook(b->L, count_hook, LUA_MASKCOUNT, static_cast<int>(interval));
    }
  }
  return p;
}

int panic(lua_State* L) {
  const char* msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
  std::fprintf(stderr, "phub config: unprotected Lua error: %s\n", msg);
  std::abort();
}

// Charges the instructions since the last run (the interval) and checks the limits.
void count_hook(lua_State* L, lua_Debug* /*ar*/) { charge(L, budget_of(L).hook_interval); }

// "file:line: " of the innermost Lua function on the stack (level 0 in a hook, 1 in a C function).
std::string where(lua_State* L) {
  lua_Debug ar;
  for (int level = 0; level < 8 && lua_getstack(L, level, &ar) != 0; ++level) {
    if (lua_getinfo(L, "Sl", &ar) != 0 && ar.currentline > 0) {
      return std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
    }
  }
  return {};
}

[[noreturn]] void raise_hit(lua_State* L) {
  Budget& b = budget_of(L);
  // Without a script position (the main chunk's parser) run_script names the file instead.
  if (b.first_message.empty()) {
    std::string at = where(L);
    if (!at.empty()) b.first_message = at + b.limit_text();
  }
  b.hook_interval = 1;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);  // from now on every instruction raises again
  lua_pushlstring(L, b.first_message.data(), b.first_message.size());
  lua_error(L);
  std::abort();  // lua_error does not return
}

// Owns a lua_State whose allocator and hook account to the Budget it holds.
class LuaState {
 public:
  explicit LuaState(const LoadLimits& limits) {
    budget_.limits = limits;
    budget_.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limits.max_wall_ms);
    L_ = lua_newstate(capped_alloc, &budget_);
    budget_.L = L_;
    if (L_ != nullptr) {
      *static_cast<Budget**>(lua_getextraspace(L_)) = &budget_;
      lua_atpanic(L_, panic);
    }
  }
  ~LuaState() {
    if (L_ != nullptr) lua_close(L_);
  }
  LuaState(const LuaState&) = delete;
  LuaState& operator=(const LuaState&) = delete;

  [[nodiscard]] lua_State* get() const { return L_; }
  [[nodiscard]] Budget& budget() { return budget_; }

 private:
  Budget budget_;
  lua_State* L_ = nullptr;
};

// The message of a failed script: the error string, or a note for non-string error objects.
std::string error_text(lua_State* L, std::string_view display) {
  switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, -1, &n);
      return excerpt(std::string_view(s, n), kMaxErrorBytes);
    }
    case LUA_TNUMBER: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.14g", lua_tonumber(L, -1));
      return std::string(display) + ": config script raised error " + buf;
    }
    default:
      return std::string(display) + ": config script raised an error object of type " +
             lua_typename(L, lua_type(L, -1));
  }
}

}  // namespace

std::string Budget::limit_text() const {
  switch (hit) {
    case Hit::memory: return "config script exceeded " + std::to_string(limits.max_memory_bytes) + " bytes of memory";
    case Hit::instructions: return "config script exceeded " + std::to_string(limits.max_instructions) + " instructions";
    case Hit::time: return "config script exceeded " + std::to_string(limits.max_wall_ms) + " ms of wall-clock time";
    case Hit::none: break;
  }
  return "config script within its limits";
}

Budget& budget_of(lua_State* L) { return **static_cast<Budget**>(lua_getextraspace(L)); }

void charge(lua_State* L, uint64_t units) {
  Budget& b = budget_of(L);
  if (b.hit == Hit::none) {
    b.instructions = units > UINT64_MAX - b.instructions ? UINT64_MAX : b.instructions + units;
    if (b.instructions > b.limits.max_instructions) {
      b.hit = Hit::instructions;
    } else if (b.limits.max_wall_ms != 0 && std::chrono::steady_clock::now() > b.deadline) {
      b.hit = Hit::time;
    }
  }
  if (b.hit != Hit::none) raise_hit(L);
}

void charge_upfront(lua_State* L, uint64_t units) {
  Budget& b = budget_of(L);
  // Past the instruction budget anyway: charge() names that limit.
  bool within_budget = units <= b.limits.max_instructions - std::min(b.instructions, b.limits.max_instructions);
  if (b.hit == Hit::none && within_budget && b.limits.max_wall_ms != 0) {
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(b.deadline - std::chrono::steady_clock::now());
    uint64_t need = units > UINT64_MAX / kNsPerUnitWorst ? UINT64_MAX : units * kNsPerUnitWorst;
    if (left.count() <= 0 || need > static_cast<uint64_t>(left.count())) b.hit = Hit::time;
  }
  charge(L, units);
}

namespace {

struct ChunkReader {
  const char* text;
  size_t size;
  size_t offset;
};

// Hands the parser the next piece of a text chunk, charging it first (the parser's clock check).
const char* read_piece(lua_State* L, void* ud, size_t* size) {
  auto* r = static_cast<ChunkReader*>(ud);
  size_t n = std::min(kChunkPiece, r->size - r->offset);
  *size = n;
  if (n == 0) return nullptr;
  charge(L, 1 + n / kBytesPerUnit);
  const char* piece = r->text + r->offset;
  r->offset += n;
  return piece;
}

}  // namespace

int load_text_chunk(lua_State* L, const char* text, size_t size, const char* chunkname) {
  ChunkReader reader{text, size, 0};
  return lua_load(L, read_piece, &reader, chunkname, "t");
}

void reraise_if_hit(lua_State* L) {
  if (budget_of(L).hit != Hit::none) raise_hit(L);
}

Expected<Value, std::string> run_script(std::string_view text, const std::string& chunkname,
                                        std::string_view display, const LoadLimits& limits, Includes* includes) {
  LuaState state(limits);
  lua_State* L = state.get();
  Budget& b = state.budget();
  b.includes = includes;
  std::string prefix = std::string(display) + ": ";
  if (L == nullptr) return unexpected(prefix + "cannot create a Lua state within " +
                                      std::to_string(limits.max_memory_bytes) + " bytes of memory");
  if (text.size() > limits.max_memory_bytes) {
    return unexpected(prefix + "the config text of " + std::to_string(text.size()) + " bytes is larger than the " +
                      std::to_string(limits.max_memory_bytes) + " bytes of memory a config script may use");
  }
  lua_pushcfunction(L, open_sandbox);
  int status = lua_pcall(L, 0, 0, 0);
  if (status == LUA_OK) {
    b.hook_interval = hook_interval_for(b);
    lua_sethook(L, count_hook, LUA_MASKCOUNT, static_cast<int>(b.hook_interval));
    b.armed = true;
    status = load_text_chunk(L, text.data(), text.size(), chunkname.c_str());
  }
  if (status == LUA_OK) status = lua_pcall(L, 0, 1, 0);
  b.armed = false;
  lua_sethook(L, nullptr, 0, 0);
  if (b.hit != Hit::none) return unexpected(b.first_message.empty() ? prefix + b.limit_text() : b.first_message);
  if (status != LUA_OK) return unexpected(error_text(L, display));
  if (lua_type(L, -1) != LUA_TTABLE) {
    return unexpected(prefix + "the config script must return a table, got " + luaL_typename(L, -1));
  }
  lua_gc(L, LUA_GCSTOP);  // no collection (so no Lua code) while copying out
  auto value = copy_out(L, lua_gettop(L), limits);
  if (!value) return unexpected(prefix + value.error());
  return std::move(*value);
}

}  // namespace phub::config::detail
