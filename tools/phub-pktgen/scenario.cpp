// The `pktgen` Lua table: set/get, run, start/stop/stats, sleep, jobs, result, check/fail, print.
#include "scenario.hpp"

#include <lua.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

namespace phub::pktgen {
namespace {

struct Ctx {
  Session* session;
  const Generator* g;
  RunSettings settings;
  ScenarioResult* out;
};

Ctx& ctx(lua_State* L) { return *static_cast<Ctx*>(lua_touserdata(L, lua_upvalueindex(1))); }

double num(lua_State* L, int idx, const char* key) {
  if (!lua_isnumber(L, idx)) luaL_error(L, "pktgen.set: %s needs a number", key);
  return lua_tonumber(L, idx);
}

// Set one run parameter from the value at stack index `idx`.
void set_one(lua_State* L, RunSettings& s, const std::string& k, int idx) {
  if (k == "mode") {
    const std::string v = luaL_checkstring(L, idx);
    if (v != "open" && v != "closed") luaL_error(L, "pktgen.set: mode is 'open' or 'closed', not '%s'", v.c_str());
    s.mode = v == "open" ? gen::LoopMode::open : gen::LoopMode::closed;
  } else if (k == "reorder") {
    s.reorder = lua_toboolean(L, idx) != 0;
  } else if (k == "inject") {
    luaL_checktype(L, idx, LUA_TTABLE);
    s.inject = {};
    lua_pushnil(L);
    while (lua_next(L, idx < 0 ? idx - 1 : idx) != 0) {
      const auto f = gen::parse_fault(luaL_checkstring(L, -2));
      if (!f) luaL_error(L, "pktgen.set: unknown fault '%s'", lua_tostring(L, -2));
      s.inject[static_cast<size_t>(*f)] = static_cast<uint64_t>(num(L, -1, "inject"));
      lua_pop(L, 1);
    }
  } else {
    const double v = num(L, idx, k.c_str());
    if (k == "rate") s.rate_pps = v;
    else if (k == "duration") s.duration_s = v;
    else if (k == "rounds") s.rounds = static_cast<uint64_t>(v);
    else if (k == "loss") s.loss = v;
    else if (k == "dup") s.dup = v;
    else if (k == "window") s.window = static_cast<uint32_t>(v);
    else if (k == "rto_ms") s.rto_ms = v;
    else if (k == "drain_ms") s.drain_ms = v;
    else if (k == "settle_s") s.settle_s = v;
    else if (k == "progress_ms") s.progress_ms = static_cast<uint32_t>(v);
    else if (k == "seed") s.seed = static_cast<uint64_t>(v);
    else if (k == "inject_job") s.inject_job = static_cast<uint32_t>(v);
    else luaL_error(L, "pktgen.set: unknown parameter '%s'", k.c_str());
  }
}

void set_table(lua_State* L, RunSettings& s, int idx) {
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    set_one(L, s, luaL_checkstring(L, -2), lua_gettop(L));
    lua_pop(L, 1);
  }
}

// The settings of a call: the scenario's, overridden by an optional table argument.
RunSettings call_settings(lua_State* L, int idx) {
  RunSettings s = ctx(L).settings;
  if (lua_istable(L, idx)) set_table(L, s, idx);
  return s;
}

int l_set(lua_State* L) {
  if (lua_istable(L, 1)) {
    set_table(L, ctx(L).settings, 1);
  } else {
    set_one(L, ctx(L).settings, luaL_checkstring(L, 1), 2);
  }
  return 0;
}

int l_get(lua_State* L) {
  const RunSettings& s = ctx(L).settings;
  const std::string k = luaL_checkstring(L, 1);
  if (k == "mode") lua_pushstring(L, s.mode == gen::LoopMode::open ? "open" : "closed");
  else if (k == "rate") lua_pushnumber(L, s.rate_pps);
  else if (k == "duration") lua_pushnumber(L, s.duration_s);
  else if (k == "rounds") lua_pushinteger(L, static_cast<lua_Integer>(s.rounds));
  else if (k == "loss") lua_pushnumber(L, s.loss);
  else if (k == "dup") lua_pushnumber(L, s.dup);
  else if (k == "window") lua_pushinteger(L, s.window);
  else if (k == "reorder") lua_pushboolean(L, s.reorder);
  else return luaL_error(L, "pktgen.get: unknown parameter '%s'", k.c_str());
  return 1;
}

int l_run(lua_State* L) {
  auto r = ctx(L).session->run(call_settings(L, 1));
  if (!r) return luaL_error(L, "pktgen.run: %s", r.error().c_str());
  push_lua(L, *r);
  return 1;
}

int l_start(lua_State* L) {
  if (auto r = ctx(L).session->begin(call_settings(L, 1)); !r) return luaL_error(L, "pktgen.start: %s", r.error().c_str());
  return 0;
}

int l_stop(lua_State* L) {
  push_lua(L, ctx(L).session->end());
  return 1;
}

int l_stats(lua_State* L) {
  push_lua(L, ctx(L).session->live());
  return 1;
}

int l_sleep(lua_State* L) {
  ctx(L).session->wait(luaL_checknumber(L, 1));
  return 0;
}

int l_delay(lua_State* L) {
  ctx(L).session->wait(luaL_checknumber(L, 1) / 1e3);
  return 0;
}

int l_jobs(lua_State* L) {
  Record jobs;
  jobs.array = true;
  for (const auto& j : ctx(L).g->jobs()) {
    const gen::JobSpec& s = j.wl.spec();
    auto o = object();
    o->set("id", static_cast<double>(s.id));
    o->set("name", s.name);
    o->set("workers", static_cast<double>(s.workers));
    o->set("elems", static_cast<double>(j.wl.layout().total_elems()));
    o->set("chunks", static_cast<double>(j.wl.layout().chunk_count()));
    o->set("segments", static_cast<double>(j.wl.segments_total()));
    o->set("dtype", std::string(dtype_name(s.dtype)));
    o->set("mode", std::string(s.mode == gen::Mode::ps ? "ps" : "allreduce"));
    jobs.push(o);
  }
  push_lua(L, jobs);
  return 1;
}

int l_result(lua_State* L) {
  const std::string name = luaL_checkstring(L, 1);
  if (lua_isnumber(L, 2)) {
    ctx(L).out->results.set(name, lua_tonumber(L, 2));
  } else if (lua_isboolean(L, 2)) {
    ctx(L).out->results.set(name, lua_toboolean(L, 2) != 0);
  } else {
    ctx(L).out->results.set(name, std::string(luaL_checkstring(L, 2)));
  }
  return 0;
}

int l_check(lua_State* L) {
  if (lua_toboolean(L, 1) == 0) {
    const std::string msg = luaL_optstring(L, 2, "check failed");
    std::fprintf(stderr, "pktgen: CHECK FAILED: %s\n", msg.c_str());
    ctx(L).out->failures.push_back(msg);
  }
  lua_pushboolean(L, lua_toboolean(L, 1));
  return 1;
}

int l_fail(lua_State* L) {
  const std::string msg = luaL_optstring(L, 1, "scenario failed");
  ctx(L).out->failures.push_back(msg);
  return luaL_error(L, "%s", msg.c_str());
}

int l_print(lua_State* L) {
  std::string line;
  for (int i = 1; i <= lua_gettop(L); ++i) {
    if (i > 1) line += "\t";
    line += luaL_tolstring(L, i, nullptr);
    lua_pop(L, 1);
  }
  std::fprintf(stderr, "pktgen: %s\n", line.c_str());
  return 0;
}

int l_interrupted(lua_State* L) {
  lua_pushboolean(L, g_interrupted.load() ? 1 : 0);
  return 1;
}

}  // namespace

ScenarioResult run_scenario(const std::string& path, Session& session, const Generator& g,
                            const RunSettings& defaults) {
  ScenarioResult out;
  std::unique_ptr<lua_State, void (*)(lua_State*)> L(luaL_newstate(), lua_close);
  if (!L) {
    out.error = "cannot create a Lua state";
    return out;
  }
  luaL_openlibs(L.get());
  Ctx c{&session, &g, defaults, &out};
  static const luaL_Reg fns[] = {{"set", l_set},     {"get", l_get},       {"run", l_run},     {"start", l_start},
                                 {"stop", l_stop},   {"stats", l_stats},   {"sleep", l_sleep}, {"delay", l_delay},
                                 {"jobs", l_jobs},   {"result", l_result}, {"check", l_check}, {"fail", l_fail},
                                 {"print", l_print}, {"interrupted", l_interrupted}, {nullptr, nullptr}};
  lua_newtable(L.get());
  lua_pushlightuserdata(L.get(), &c);
  luaL_setfuncs(L.get(), fns, 1);
  lua_setglobal(L.get(), "pktgen");
  if (luaL_dofile(L.get(), path.c_str()) != LUA_OK) {
    out.error = lua_tostring(L.get(), -1) ? lua_tostring(L.get(), -1) : "unknown Lua error";
  }
  if (session.running()) (void)session.end();
  return out;
}

}  // namespace phub::pktgen
