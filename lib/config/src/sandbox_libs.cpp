// The libraries a config script sees: base, string, table, math and utf8, cut down to an explicit list
// (kAllowed). Every function on the list is one of:
//  - gated: Lua's own C function behind a gate that charges the call before it runs (one unit, one per
//    argument, one per kBytesPerUnit bytes of string arguments) and checks the clock. Such a function does
//    work linear in its arguments and its result, which the memory limit bounds;
//  - replaced: our own version that charges as it loops (rep, concat, move, load), or that wraps Lua's
//    with a charge per element or per comparison (insert, remove, unpack, sort) or with the worst case of
//    a pattern, charged before it runs (find, match, gmatch, gsub);
//  - cheap: constant work and no gate (math.random and math.randomseed, whose C closures own state).
// A library function not on the list is removed, so a newer Lua cannot add an unbounded call unseen.
//
// These functions run inside Lua and may raise Lua errors (a longjmp): they keep no C++ object with a
// destructor alive across a Lua API call that can raise.
#include <lua.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string_view>

#include "sandbox.hpp"

namespace phub::config::detail {
namespace {

constexpr lua_Integer kRandomSeed = 0x70687562;  // "phub": configs that use math.random stay reproducible
constexpr uint64_t kLoopUnitsPerCharge = 1u << 12;  // a replaced loop charges (and checks the clock) this often

uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// Number of elements in i..j (0 when empty), without overflow.
uint64_t range_size(lua_Integer i, lua_Integer j) {
  return j < i ? 0 : static_cast<uint64_t>(j) - static_cast<uint64_t>(i) + 1;
}

// The cost of a gated call: one unit, one per argument, one per kBytesPerUnit bytes of string arguments.
uint64_t argument_units(lua_State* L) {
  int n = lua_gettop(L);
  uint64_t units = 1 + static_cast<uint64_t>(n);
  for (int i = 1; i <= n; ++i) {
    if (lua_type(L, i) == LUA_TSTRING) units = sat_add(units, lua_rawlen(L, i) / kBytesPerUnit);
  }
  return units;
}

// Runs Lua's C function (upvalue 1) in this call's frame: argument errors and error() positions name
// the script's call, as without the gate. Only functions without upvalues are gated (checked at install).
int call_original(lua_State* L) { return lua_tocfunction(L, lua_upvalueindex(1))(L); }

int gate(lua_State* L) {
  charge_upfront(L, argument_units(L));
  return call_original(L);
}

// pcall and xpcall that let limit errors through: a script cannot catch running out of its budget.
int sandbox_pcall(lua_State* L) {
  luaL_checkany(L, 1);
  charge(L, 1);
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
  charge(L, 1);
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

// load() of text only. A string is parsed in charged pieces; a reader function is Lua code (or a gated
// call) each time the parser asks it for more, and cannot swallow a limit error either.
int sandbox_load(lua_State* L) {
  size_t len = 0;
  const char* text = lua_tolstring(L, 1, &len);
  if (text == nullptr) {
    if (lua_gettop(L) < 3) lua_settop(L, 3);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    charge(L, 1);
    int results = call_original(L);
    reraise_if_hit(L);
    return results;
  }
  const char* chunkname = luaL_optstring(L, 2, text);
  luaL_optstring(L, 3, "bt");  // checked as Lua does; the mode is "t" whatever it says
  int env = lua_isnone(L, 4) ? 0 : 4;
  charge(L, 1);
  int status = load_text_chunk(L, text, len, chunkname);
  reraise_if_hit(L);
  if (status != LUA_OK) {
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env != 0) {
    lua_pushvalue(L, env);
    if (lua_setupvalue(L, -2, 1) == nullptr) lua_pop(L, 1);
  }
  return 1;
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
  charge(L, 1);
  return call_original(L);
}

// string.rep: its bytes charged up front, its copies in charged rounds, so a huge count stops at the
// budget or the clock, not after it.
int sandbox_rep(lua_State* L) {
  size_t len = 0;
  size_t sep_len = 0;
  const char* s = luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char* sep = luaL_optlstring(L, 3, "", &sep_len);
  charge(L, 1);
  if (n <= 0 || len + sep_len == 0) {  // empty copies: the result is "" whatever the count
    lua_pushliteral(L, "");
    return 1;
  }
  if (len + sep_len < len || len + sep_len > static_cast<size_t>(INT_MAX) / static_cast<uint64_t>(n)) {
    return luaL_error(L, "resulting string too large");
  }
  size_t total = static_cast<size_t>(n) * len + static_cast<size_t>(n - 1) * sep_len;
  // The result's bytes are charged before they are allocated (allocating and touching them takes time
  // the loop below cannot see); the loop charges its copies.
  charge_upfront(L, total / kBytesPerUnit);
  luaL_Buffer b;
  char* p = luaL_buffinitsize(L, &b, total);
  uint64_t pending = 0;
  for (lua_Integer i = 1; i <= n; ++i) {
    std::memcpy(p, s, len);
    p += len;
    if (i < n && sep_len > 0) {
      std::memcpy(p, sep, sep_len);
      p += sep_len;
    }
    ++pending;
    if (pending >= kLoopUnitsPerCharge) {
      charge(L, pending);
      pending = 0;
    }
  }
  charge(L, pending);
  luaL_pushresultsize(&b, total);
  return 1;
}

// string.format: measures each string argument (a precision makes it strlen a string it does not print)
// in one C call, so its cost is charged up front and refused if it cannot end before the deadline.
int sandbox_format(lua_State* L) {
  charge_upfront(L, argument_units(L));
  return call_original(L);
}

uint64_t sat_mul(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

// Lua's pattern functions run in C, where neither the count hook nor the clock can stop them, and they
// backtrack: a pattern of m bytes with q repetitions (*, +, -, ?, %b, a back-reference) may take about
// (m+1)(n+1)^(q+1) steps over a subject of n bytes. A plain find compares the needle at every start:
// (m+1)(n+1). That bound is charged before Lua's own function runs, one unit per step, and refused if it
// could not end before the deadline. gmatch is charged for all its iterations at once (each starts where
// the last match ended); gsub's replacement function is Lua code and charged as it runs.
uint64_t pattern_units(lua_State* L, bool plain) {
  size_t subject_len = 0;
  size_t pattern_len = 0;
  luaL_checklstring(L, 1, &subject_len);
  const char* pattern = luaL_checklstring(L, 2, &pattern_len);
  uint64_t per_start = subject_len + 1;
  uint64_t units = sat_mul(pattern_len + 1, per_start);
  if (plain) return units;
  for (size_t i = 0; i < pattern_len; ++i) {
    char c = pattern[i];
    char next = i + 1 < pattern_len ? pattern[i + 1] : '\0';
    bool scan = c == '%' && (next == 'b' || (next >= '1' && next <= '9'));  // %bxy, a back-reference
    if (c == '%') ++i;  // an escaped character is not a repetition
    if (scan || c == '*' || c == '+' || c == '-' || c == '?') units = sat_mul(units, per_start);
  }
  return units;
}

int sandbox_pattern(lua_State* L) {  // match, gmatch, gsub
  charge_upfront(L, pattern_units(L, false));
  return call_original(L);
}

int sandbox_find(lua_State* L) {  // find honours its `plain` argument
  charge_upfront(L, pattern_units(L, lua_toboolean(L, 4) != 0));
  return call_original(L);
}

// table.* on plain tables only: a metatable's __len or __index could lie about the work or run code
// between elements.
void check_plain_table(lua_State* L, int arg) {
  luaL_checktype(L, arg, LUA_TTABLE);
  if (lua_getmetatable(L, arg) != 0) {
    luaL_argerror(L, arg, "tables with metatables are not supported by table functions in a config");
  }
}

int sandbox_table_shift(lua_State* L) {  // insert, remove: shift up to #t elements (which exist)
  check_plain_table(L, 1);
  charge_upfront(L, lua_rawlen(L, 1) + 1);
  return call_original(L);
}

int sandbox_unpack(lua_State* L) {  // unpack(t, i, j): at most the stack's size of results
  check_plain_table(L, 1);
  lua_Integer i = luaL_optinteger(L, 2, 1);
  lua_Integer j = luaL_opt(L, luaL_checkinteger, 3, static_cast<lua_Integer>(lua_rawlen(L, 1)));
  charge_upfront(L, range_size(i, j) + 1);
  return call_original(L);
}

// table.concat(t, sep, i, j), adding elements in charged rounds.
int sandbox_concat(lua_State* L) {
  check_plain_table(L, 1);
  size_t sep_len = 0;
  const char* sep = luaL_optlstring(L, 2, "", &sep_len);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  lua_Integer last = luaL_opt(L, luaL_checkinteger, 4, static_cast<lua_Integer>(lua_rawlen(L, 1)));
  charge(L, 1);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  uint64_t pending = 0;
  for (; i <= last; ++i) {
    lua_rawgeti(L, 1, i);
    if (lua_isstring(L, -1) == 0) {
      return luaL_error(L, "invalid value (at index %I) in table for 'concat'", static_cast<LUAI_UACINT>(i));
    }
    pending += 1 + (lua_rawlen(L, -1) + sep_len) / kBytesPerUnit;
    luaL_addvalue(&b);
    if (i != last) luaL_addlstring(&b, sep, sep_len);
    if (pending >= kLoopUnitsPerCharge) {
      charge(L, pending);
      pending = 0;
    }
    if (i == LUA_MAXINTEGER) break;
  }
  charge(L, pending);
  luaL_pushresult(&b);
  return 1;
}

// table.move(a1, f, e, t [, a2]), moving in charged rounds: a range of nils costs no memory, only time.
int sandbox_move(lua_State* L) {
  lua_Integer f = luaL_checkinteger(L, 2);
  lua_Integer e = luaL_checkinteger(L, 3);
  lua_Integer t = luaL_checkinteger(L, 4);
  int dest = lua_isnoneornil(L, 5) ? 1 : 5;
  check_plain_table(L, 1);
  check_plain_table(L, dest);
  charge(L, 1);
  if (e >= f) {
    luaL_argcheck(L, f > 0 || e < LUA_MAXINTEGER + f, 3, "too many elements to move");
    lua_Integer n = e - f + 1;
    luaL_argcheck(L, t <= LUA_MAXINTEGER - n + 1, 4, "destination wrap around");
    bool forward = t > e || t <= f || (dest != 1 && lua_rawequal(L, 1, dest) == 0);
    uint64_t pending = 0;
    for (lua_Integer k = 0; k < n; ++k) {
      lua_Integer i = forward ? k : n - 1 - k;
      lua_rawgeti(L, 1, f + i);
      lua_rawseti(L, dest, t + i);
      if (++pending >= kLoopUnitsPerCharge) {
        charge(L, pending);
        pending = 0;
      }
    }
    charge(L, pending);
  }
  lua_pushvalue(L, dest);
  return 1;
}

// The comparison table.sort uses: the script's function (upvalue 1) or `<`, charged per call; `<` on two
// strings reads up to the shorter one.
int charged_less(lua_State* L) {
  if (lua_isnil(L, lua_upvalueindex(1))) {
    uint64_t units = 1;
    if (lua_type(L, 1) == LUA_TSTRING && lua_type(L, 2) == LUA_TSTRING) {
      units += std::min(lua_rawlen(L, 1), lua_rawlen(L, 2)) / kBytesPerUnit;
    }
    charge(L, units);
    lua_pushboolean(L, lua_compare(L, 1, 2, LUA_OPLT));
    return 1;
  }
  charge(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

int sandbox_sort(lua_State* L) {
  check_plain_table(L, 1);
  if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  charge(L, lua_rawlen(L, 1) + 1);
  lua_pushcclosure(L, charged_less, 1);  // takes the comparison (or nil) as its upvalue
  return call_original(L);
}

enum class Kind : uint8_t {
  value,     // not a function (math.pi, _VERSION, ...): kept as it is
  cheap,     // constant work, left as Lua's
  gated,     // Lua's, behind the charging gate
  replaced,  // `fn` instead of Lua's
  wrapped,   // `fn`, which calls Lua's function (upvalue 1) itself
};

struct Allowed {
  std::string_view name;
  Kind kind;
  lua_CFunction fn = nullptr;
};

constexpr Allowed kBase[] = {
    {"_G", Kind::value},
    {"_VERSION", Kind::value},
    {"assert", Kind::gated},
    {"collectgarbage", Kind::replaced, sandbox_collectgarbage},
    {"error", Kind::gated},
    {"getmetatable", Kind::gated},
    {"ipairs", Kind::gated},
    {"load", Kind::wrapped, sandbox_load},
    {"math", Kind::value},
    {"next", Kind::gated},
    {"pairs", Kind::gated},
    {"pcall", Kind::replaced, sandbox_pcall},
    {"rawequal", Kind::gated},
    {"rawget", Kind::gated},
    {"rawlen", Kind::gated},
    {"rawset", Kind::gated},
    {"select", Kind::gated},
    {"setmetatable", Kind::wrapped, sandbox_setmetatable},
    {"string", Kind::value},
    {"table", Kind::value},
    {"tonumber", Kind::gated},
    {"tostring", Kind::gated},
    {"type", Kind::gated},
    {"utf8", Kind::value},
    {"xpcall", Kind::replaced, sandbox_xpcall},
};

constexpr Allowed kString[] = {
    {"byte", Kind::gated},
    {"char", Kind::gated},
    {"find", Kind::wrapped, sandbox_find},
    {"format", Kind::wrapped, sandbox_format},
    {"gmatch", Kind::wrapped, sandbox_pattern},
    {"gsub", Kind::wrapped, sandbox_pattern},
    {"len", Kind::gated},
    {"lower", Kind::gated},
    {"match", Kind::wrapped, sandbox_pattern},
    {"pack", Kind::gated},
    {"packsize", Kind::gated},
    {"rep", Kind::replaced, sandbox_rep},              {"reverse", Kind::gated}, {"sub", Kind::gated},
    {"unpack", Kind::gated},   {"upper", Kind::gated},
};

constexpr Allowed kTable[] = {
    {"concat", Kind::replaced, sandbox_concat}, {"insert", Kind::wrapped, sandbox_table_shift},
    {"move", Kind::replaced, sandbox_move},     {"pack", Kind::gated},
    {"remove", Kind::wrapped, sandbox_table_shift}, {"sort", Kind::wrapped, sandbox_sort},
    {"unpack", Kind::wrapped, sandbox_unpack},
};

constexpr Allowed kMath[] = {
    {"abs", Kind::gated},   {"acos", Kind::gated},      {"asin", Kind::gated},       {"atan", Kind::gated},
    {"ceil", Kind::gated},  {"cos", Kind::gated},       {"deg", Kind::gated},        {"exp", Kind::gated},
    {"floor", Kind::gated}, {"fmod", Kind::gated},      {"huge", Kind::value},       {"log", Kind::gated},
    {"max", Kind::gated},   {"maxinteger", Kind::value}, {"min", Kind::gated},       {"mininteger", Kind::value},
    {"modf", Kind::gated},  {"pi", Kind::value},        {"rad", Kind::gated},        {"random", Kind::cheap},
    {"randomseed", Kind::cheap}, {"sin", Kind::gated},  {"sqrt", Kind::gated},       {"tan", Kind::gated},
    {"tointeger", Kind::gated}, {"type", Kind::gated},  {"ult", Kind::gated},
};

constexpr Allowed kUtf8[] = {
    {"char", Kind::gated}, {"charpattern", Kind::value}, {"codepoint", Kind::gated},
    {"codes", Kind::gated}, {"len", Kind::gated},        {"offset", Kind::gated},
};

template <size_t N>
const Allowed* find_allowed(const Allowed (&list)[N], std::string_view name) {
  for (const Allowed& a : list) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

// Cuts the library table at the top down to `list` and puts each function behind its gate or
// replacement. Raises if a gated function carries upvalues (it could not run in the gate's frame).
template <size_t N>
void restrict_library(lua_State* L, const Allowed (&list)[N], const char* lib) {
  int table = lua_gettop(L);
  // Drop what is not on the list (first collect the names: a table cannot change during lua_next).
  lua_newtable(L);
  int drop = lua_gettop(L);
  lua_Integer ndrop = 0;
  lua_pushnil(L);
  while (lua_next(L, table) != 0) {
    lua_pop(L, 1);
    size_t len = 0;
    const char* key = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : nullptr;
    bool keep = key != nullptr && find_allowed(list, std::string_view(key, len)) != nullptr;
    if (!keep) {
      lua_pushvalue(L, -1);
      lua_rawseti(L, drop, ++ndrop);
    }
  }
  for (lua_Integer i = 1; i <= ndrop; ++i) {
    lua_rawgeti(L, drop, i);
    lua_pushnil(L);
    lua_rawset(L, table);
  }
  lua_pop(L, 1);
  for (const Allowed& a : list) {
    char name[32] = {};  // plain data: a Lua error may unwind this frame
    std::memcpy(name, a.name.data(), std::min(a.name.size(), sizeof name - 1));
    int type = lua_getfield(L, table, name);
    if (a.kind == Kind::value || a.kind == Kind::cheap || type == LUA_TNIL) {
      lua_pop(L, 1);
      continue;
    }
    if (a.kind == Kind::replaced) {
      lua_pop(L, 1);
      lua_pushcfunction(L, a.fn);
    } else {
      if (lua_tocfunction(L, -1) == nullptr || lua_getupvalue(L, -1, 1) != nullptr) {
        luaL_error(L, "sandbox: %s.%s cannot be gated", lib, name);
      }
      lua_pushcclosure(L, a.kind == Kind::gated ? gate : a.fn, 1);
    }
    lua_setfield(L, table, name);
  }
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

  lua_getglobal(L, LUA_MATHLIBNAME);
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, kRandomSeed);
  lua_call(L, 1, 0);
  lua_pop(L, 1);

  lua_pushglobaltable(L);
  restrict_library(L, kBase, "_G");
  lua_pop(L, 1);
  lua_register(L, "include", sandbox_include);  // our own: charges, and parses and runs under this budget

  lua_getglobal(L, LUA_STRLIBNAME);
  restrict_library(L, kString, LUA_STRLIBNAME);
  lua_pop(L, 1);
  // Strings' metatable (whose __index is the string table) cannot be read or changed by the script.
  lua_pushliteral(L, "");
  lua_getmetatable(L, -1);
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_pop(L, 2);

  lua_getglobal(L, LUA_TABLIBNAME);
  restrict_library(L, kTable, LUA_TABLIBNAME);
  lua_pop(L, 1);
  lua_getglobal(L, LUA_MATHLIBNAME);
  restrict_library(L, kMath, LUA_MATHLIBNAME);
  lua_pop(L, 1);
  lua_getglobal(L, LUA_UTF8LIBNAME);
  restrict_library(L, kUtf8, LUA_UTF8LIBNAME);
  lua_pop(L, 1);
  return 0;
}

}  // namespace phub::config::detail
