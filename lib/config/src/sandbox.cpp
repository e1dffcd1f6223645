// The sandboxed Lua state: capped allocator, instruction/deadline hook, and running a config script.
#include "sandbox.hpp"

#include <lua.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace phub::config::detail {
namespace {

constexpr size_t kMaxErrorBytes = 2000;  // a script's error message is cut to this

// The allocator of a sandboxed state: refuses to grow past the memory limit, and refuses every growth
// once the limit was hit so that a caught memory error cannot be retried. Shrinking never fails.
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
    if (b->hit == Hit::memory || nsize - old_bytes > room) {
      if (b->hit == Hit::none) b->hit = Hit::memory;
      return nullptr;
    }
  }
  void* p = std::realloc(ptr, nsize);
  if (p != nullptr) b->used_bytes = b->used_bytes - old_bytes + nsize;
  return p;
}

int panic(lua_State* L) {
  const char* msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
  std::fprintf(stderr, "phub config: unprotected Lua error: %s\n", msg);
  std::abort();
}

// How often the count hook runs; the budget is charged per run.
uint64_t hook_every(const LoadLimits& limits) {
  return std::clamp<uint64_t>(limits.max_instructions, 1, 1000);
}

void count_hook(lua_State* L, lua_Debug* /*ar*/) { charge(L, hook_every(budget_of(L).limits)); }

// "file:line: " of the innermost Lua function on the stack (level 0 in a hook, 1 in a C function).
std::string where(lua_State* L) {
  lua_Debug ar;
  for (int level = 0; level < 2 && lua_getstack(L, level, &ar) != 0; ++level) {
    if (lua_getinfo(L, "Sl", &ar) != 0 && ar.currentline > 0) {
      return std::string(ar.short_src) + ":" + std::to_string(ar.currentline) + ": ";
    }
  }
  return {};
}

[[noreturn]] void raise_hit(lua_State* L) {
  Budget& b = budget_of(L);
  if (b.first_message.empty()) b.first_message = where(L) + b.limit_text();
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
      std::string msg(s, std::min(n, kMaxErrorBytes));
      return n > kMaxErrorBytes ? msg + "..." : msg;
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

void reraise_if_hit(lua_State* L) {
  if (budget_of(L).hit != Hit::none) raise_hit(L);
}

Expected<Value, std::string> run_script(std::string_view text, const std::string& chunkname,
                                        std::string_view display, const LoadLimits& limits) {
  LuaState state(limits);
  lua_State* L = state.get();
  Budget& b = state.budget();
  std::string prefix = std::string(display) + ": ";
  if (L == nullptr) return unexpected(prefix + "cannot create a Lua state within " +
                                      std::to_string(limits.max_memory_bytes) + " bytes of memory");
  lua_pushcfunction(L, open_sandbox);
  int status = lua_pcall(L, 0, 0, 0);
  if (status == LUA_OK) {
    lua_sethook(L, count_hook, LUA_MASKCOUNT, static_cast<int>(hook_every(limits)));
    status = luaL_loadbufferx(L, text.data(), text.size(), chunkname.c_str(), "t");
  }
  if (status == LUA_OK) status = lua_pcall(L, 0, 1, 0);
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
