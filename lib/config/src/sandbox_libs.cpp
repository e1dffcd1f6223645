// The libraries a config script sees: base, string, table, math, utf8, minus I/O and code loading,
// with wrappers that charge C-level loops to the instruction budget and keep limit errors uncatchable.
//
// These functions run inside Lua and may raise Lua errors (a longjmp): they keep no C++ object with a
// destructor alive across a Lua API call that can raise.
#include <lua.hpp>

#include <cstring>

#include "sandbox.hpp"

namespace phub::config::detail {
namespace {

constexpr lua_Integer kRandomSeed = 0x70687562;  // "phub": configs that use math.random stay reproducible

uint64_t sat_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// Number of elements in i..j (0 when empty), without overflow.
uint64_t range_size(lua_Integer i, lua_Integer j) {
  return j < i ? 0 : static_cast<uint64_t>(j) - static_cast<uint64_t>(i) + 1;
}

// Calls the wrapped library function (upvalue 1) with all arguments and returns all its results.
int call_original(lua_State* L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
  return lua_gettop(L);
}

// pcall and xpcall that let limit errors through: a script cannot catch running out of its budget.
int sandbox_pcall(lua_State* L) {
  luaL_checkany(L, 1);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  int status = lua_pcall(L, lua_gettop(L) - 2, LUA_MULTRET, 0);
  reraise_if_hit(L);
  if (status == LUA_OK) return lua_gettop(L);
  lua_pushboolean(L, 0);
  lua_replace(L, 1);
  return 2;
}

// The message handler runs before the stack unwinds, and after an error raised from the count hook it
// runs with hooks off: so once a limit is hit the script's handler is skipped.
int guarded_handler(lua_State* L) {
  if (budget_of(L).hit != Hit::none) return 1;  // the error object, unchanged
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

int sandbox_xpcall(lua_State* L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, guarded_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);  // f, msgh, args..., true
  lua_pushvalue(L, 1);    // f, msgh, args..., true, f
  lua_rotate(L, 3, 2);    // f, msgh, true, f, args...
  int status = lua_pcall(L, n - 2, LUA_MULTRET, 2);
  reraise_if_hit(L);
  if (status == LUA_OK) return lua_gettop(L) - 2;
  lua_pushboolean(L, 0);
  lua_pushvalue(L, -2);
  return 2;
}

// load() of text only, and a reader function cannot swallow a limit error.
int sandbox_load(lua_State* L) {
  if (lua_gettop(L) < 3) lua_settop(L, 3);
  lua_pushliteral(L, "t");
  lua_replace(L, 3);
  int results = call_original(L);
  reraise_if_hit(L);
  return results;
}

int sandbox_collectgarbage(lua_State* L) {
  const char* opt = luaL_optstring(L, 1, "collect");
  if (std::strcmp(opt, "count") != 0) return luaL_error(L, "collectgarbage: only \"count\" is allowed in a config");
  lua_pushnumber(L, lua_gc(L, LUA_GCCOUNT) + lua_gc(L, LUA_GCCOUNTB) / 1024.0);
  return 1;
}

// setmetatable without finalizers: a __gc could run code at lua_close, outside any budget check.
int sandbox_setmetatable(lua_State* L) {
  if (lua_type(L, 2) == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    bool has_gc = lua_rawget(L, 2) != LUA_TNIL;
    lua_pop(L, 1);
    if (has_gc) return luaL_error(L, "setmetatable: __gc metamethods are not allowed in a config");
  }
  return call_original(L);
}

// string.rep loops once per copy even when the copies are empty: charge the count, skip empty results.
int sandbox_rep(lua_State* L) {
  size_t len = 0;
  size_t sep_len = 0;
  luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &sep_len);
  if (n <= 0 || len + sep_len == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  charge(L, static_cast<uint64_t>(n));
  return call_original(L);
}

// Lua patterns backtrack: a pattern with q repetitions over n bytes may take about (n+1)^(q+1) steps,
// inside C where the count hook cannot stop it. That bound is charged before matching.
int sandbox_pattern(lua_State* L) {
  size_t subject_len = 0;
  size_t pattern_len = 0;
  luaL_checklstring(L, 1, &subject_len);
  const char* pattern = luaL_checklstring(L, 2, &pattern_len);
  bool plain_find = lua_toboolean(L, 4) != 0 && lua_toboolean(L, lua_upvalueindex(2)) != 0;
  if (!plain_find) {
    uint64_t cost = pattern_len + 1;
    uint64_t per_repetition = subject_len + 1;
    cost = sat_mul(cost, per_repetition);
    for (size_t i = 0; i < pattern_len; ++i) {
      char c = pattern[i];
      bool backref = c == '%' && i + 1 < pattern_len && pattern[i + 1] >= '1' && pattern[i + 1] <= '9';
      if (c == '*' || c == '+' || c == '-' || c == '?' || backref) cost = sat_mul(cost, per_repetition);
    }
    charge(L, cost);
  }
  return call_original(L);
}

// table.* on plain tables only (a metatable's __len could lie about the length), charged by the
// number of elements the function walks.
void check_plain_table(lua_State* L, int arg) {
  luaL_checktype(L, arg, LUA_TTABLE);
  if (lua_getmetatable(L, arg) != 0) {
    luaL_argerror(L, arg, "tables with metatables are not supported by table functions in a config");
  }
}

int sandbox_table_len_charged(lua_State* L) {  // insert, remove
  check_plain_table(L, 1);
  charge(L, lua_rawlen(L, 1) + 1);
  return call_original(L);
}

int sandbox_table_sort(lua_State* L) {
  check_plain_table(L, 1);
  uint64_t n = lua_rawlen(L, 1);
  uint64_t log2n = 1;
  while ((n >> log2n) != 0) ++log2n;
  charge(L, sat_mul(n + 1, log2n));
  return call_original(L);
}

int sandbox_table_range_charged(lua_State* L) {  // concat(t, sep, i, j), unpack(t, i, j)
  check_plain_table(L, 1);
  int first_arg = lua_toboolean(L, lua_upvalueindex(2)) != 0 ? 3 : 2;
  lua_Integer i = luaL_optinteger(L, first_arg, 1);
  lua_Integer j = luaL_opt(L, luaL_checkinteger, first_arg + 1, static_cast<lua_Integer>(lua_rawlen(L, 1)));
  charge(L, range_size(i, j) + 1);
  return call_original(L);
}

int sandbox_table_move(lua_State* L) {  // move(a1, f, e, t [, a2])
  check_plain_table(L, 1);
  if (!lua_isnoneornil(L, 5)) check_plain_table(L, 5);
  charge(L, range_size(luaL_checkinteger(L, 2), luaL_checkinteger(L, 3)) + 1);
  return call_original(L);
}

// Replaces table[name] (the table at the top) by fn with the original as upvalue 1 and `flag` as upvalue 2.
void wrap(lua_State* L, const char* name, lua_CFunction fn, bool flag = false) {
  lua_getfield(L, -1, name);
  lua_pushboolean(L, flag ? 1 : 0);
  lua_pushcclosure(L, fn, 2);
  lua_setfield(L, -2, name);
}

void remove(lua_State* L, const char* name) {
  lua_pushnil(L);
  lua_setfield(L, -2, name);
}

}  // namespace

int open_sandbox(lua_State* L) {
  static constexpr luaL_Reg kLibs[] = {
      {LUA_GNAME, luaopen_base},     {LUA_STRLIBNAME, luaopen_string}, {LUA_TABLIBNAME, luaopen_table},
      {LUA_MATHLIBNAME, luaopen_math}, {LUA_UTF8LIBNAME, luaopen_utf8},
  };
  for (const luaL_Reg& lib : kLibs) {
    luaL_requiref(L, lib.name, lib.func, 1);
    lua_pop(L, 1);
  }

  lua_pushglobaltable(L);
  for (const char* name : {"dofile", "loadfile", "require", "print", "warn"}) remove(L, name);
  lua_pushcfunction(L, sandbox_collectgarbage);
  lua_setfield(L, -2, "collectgarbage");
  lua_pushcfunction(L, sandbox_pcall);
  lua_setfield(L, -2, "pcall");
  lua_pushcfunction(L, sandbox_xpcall);
  lua_setfield(L, -2, "xpcall");
  wrap(L, "load", sandbox_load);
  wrap(L, "setmetatable", sandbox_setmetatable);
  lua_pop(L, 1);

  lua_getglobal(L, LUA_STRLIBNAME);
  remove(L, "dump");
  wrap(L, "rep", sandbox_rep);
  wrap(L, "find", sandbox_pattern, true);  // find honours its `plain` argument
  for (const char* name : {"match", "gmatch", "gsub"}) wrap(L, name, sandbox_pattern);
  lua_pop(L, 1);

  lua_getglobal(L, LUA_TABLIBNAME);
  wrap(L, "insert", sandbox_table_len_charged);
  wrap(L, "remove", sandbox_table_len_charged);
  wrap(L, "sort", sandbox_table_sort);
  wrap(L, "concat", sandbox_table_range_charged, true);
  wrap(L, "unpack", sandbox_table_range_charged);
  wrap(L, "move", sandbox_table_move);
  lua_pop(L, 1);

  lua_getglobal(L, LUA_MATHLIBNAME);
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, kRandomSeed);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  return 0;
}

}  // namespace phub::config::detail
