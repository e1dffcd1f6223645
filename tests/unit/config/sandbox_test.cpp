// The sandbox: no escape (os, io, require, bytecode), bounded instructions, memory, time and output size.
#include <chrono>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void expect_error(std::string_view script, std::string_view fragment, const LoadLimits& limits = {}) {
  std::string error = load_error(script, limits);
  EXPECT_NE(error.find(fragment), std::string::npos) << "script: " << script << "\nerror: " << error;
}

TEST(Sandbox, NoEscapeHatches) {
  expect_error("os.exit(1)", "test.lua:1: attempt to index a nil value (global 'os')");
  expect_error("io.write('x')", "attempt to index a nil value (global 'io')");
  expect_error("package.loadlib('libc.so.6', 'system')", "(global 'package')");
  expect_error("debug.sethook()", "(global 'debug')");
  expect_error("loadfile('/etc/passwd')", "(global 'loadfile')");
  expect_error("print('x')", "(global 'print')");
  expect_error("string.dump(print)", "(field 'dump')");
  expect_error("coroutine.wrap(print)", "(global 'coroutine')");
  expect_error("collectgarbage('stop')", "collectgarbage: only \"count\" is allowed");
  expect_error("local f, e = load(string.char(27) .. 'LuaT', 'x', 'b'); assert(f, e)",
               "attempt to load a binary chunk");
}

TEST(Sandbox, BinaryMainChunkIsRefused) {
  expect_error(std::string_view("\x1bLuaT\x00\x19\x93\r\n\x1a\n", 12), "attempt to load a binary chunk");
}

TEST(Sandbox, SafeLibrariesWork) {
  auto cfg = load_string(patched(R"lua(
    local ok, err = pcall(error, "caught")           -- ordinary errors stay catchable
    assert(not ok and err == "caught")
    assert(select(2, xpcall(error, function(m) return "handled " .. m end, "x")) == "handled x")
    assert(load("return 2 + 3")() == 5)               -- text chunks load
    assert(collectgarbage("count") > 0)
    assert(utf8.len("h\u{e9}") == 2 and math.floor(2.5) == 2 and table.concat({ "a", "b" }, "-") == "a-b")
    assert(("p0,p1"):gsub(",", ";") == "p0;p1")
    assert(#string.rep("", 2^62) == 0)               -- empty repetitions are free
    cfg.jobs[1].name = string.format("job-%d", #table.pack(1, 2, 3))
  )lua"), "test.lua");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  EXPECT_EQ(cfg->jobs[0].name, "job-3");
}

TEST(Sandbox, RandomIsSeededTheSameEveryTime) {
  std::string text = patched("cfg.eal_args = { tostring(math.random(1, 1000000000)) }");
  auto a = load_string(text, "a.lua");
  auto b = load_string(text, "b.lua");
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->eal_args, b->eal_args);
}

TEST(Sandbox, InstructionLimitNamesTheLineAndTheLimit) {
  LoadLimits small;
  small.max_instructions = 100'000;
  expect_error("local x = 0\nwhile true do x = x + 1 end", "test.lua:2: config script exceeded 100000 instructions",
               small);
  // Catching it does not help: pcall, xpcall and a load() reader re-raise the limit.
  expect_error("while true do pcall(function() while true do end end) end", "exceeded 100000 instructions", small);
  expect_error("while true do xpcall(function() while true do end end, function() while true do end end) end",
               "exceeded 100000 instructions", small);
  expect_error("while true do load(function() while true do end end) end", "exceeded 100000 instructions", small);
  expect_error("local t <close> = setmetatable({}, { __close = function() while true do end end })",
               "exceeded 100000 instructions", small);
}

TEST(Sandbox, CLoopsAreChargedToTheInstructionBudget) {
  auto t0 = Clock::now();
  expect_error("table.move({}, 1, 2^50, 2)", "config script exceeded");
  expect_error("local t = {}; t[1] = 1; table.unpack(t, 1, 2^40)", "config script exceeded");
  expect_error("local s = string.rep('a', 2000); s:gsub(string.rep('a-', 20) .. 'b', '')", "config script exceeded");
  expect_error("for i = 1, 1e9 do local s = string.rep('x', 1e6) end", "config script exceeded 50000000 instructions");
  expect_error("table.insert(setmetatable({}, { __len = function() return 2^60 end }), 1, 1)",
               "tables with metatables are not supported");
  EXPECT_LT(seconds_since(t0), 10.0);
}

TEST(Sandbox, MemoryLimitIsExact) {
  LoadLimits small;
  small.max_memory_bytes = 4u << 20;
  expect_error("local t = {} for i = 1, 1e9 do t[i] = tostring(i) end", "config script exceeded 4194304 bytes", small);
  expect_error("return { x = string.rep('ab', 1e7) }", "config script exceeded", small);
  expect_error("local ok = pcall(string.rep, 'ab', 3e6); return {}", "config script exceeded 4194304 bytes", small);
  small.max_memory_bytes = 1000;  // too small even for the libraries
  expect_error("return {}", "1000 bytes", small);
}

TEST(Sandbox, WallClockLimitStopsCostlyInstructions) {
  LoadLimits limits;
  limits.max_instructions = 1ull << 40;
  limits.max_wall_ms = 200;
  auto t0 = Clock::now();
  // Each comparison of two distinct equal 8 MB strings is one instruction doing an 8 MB memcmp.
  expect_error("local a, b = string.rep('a', 2^23), string.rep('a', 2^23)\n"
               "while true do local _ = (a == b) end",
               "config script exceeded 200 ms of wall-clock time", limits);
  EXPECT_LT(seconds_since(t0), 5.0);
}

TEST(Sandbox, CopyOutIsBounded) {
  LoadLimits limits;
  limits.max_values = 10'000;
  // A table shared 1000 times would copy 100 000 values.
  expect_error("local t = {} for i = 1, 100 do t[i] = i end\n"
               "local l = {} for i = 1, 1000 do l[i] = t end\nreturn { eal_args = l }",
               "the returned table holds more than 10000 values", limits);
  // Cycles and deep nesting end in a field error, not a hang.
  expect_error("local t = {} t.self = t; t.ports = t; return t", "ports: ");
  expect_error("local t = {} local c = t for i = 1, 100 do c.x = {} c = c.x end return { polling = t }",
               "polling.x: unknown key");
}

TEST(Sandbox, ErrorObjectsThatAreNotStrings) {
  expect_error("error({})", "test.lua: config script raised an error object of type table");
  expect_error("error(42)", "test.lua: config script raised error 42");
  expect_error("error(setmetatable({}, { __tostring = function() while true do end end }))", "of type table");
}

}  // namespace
}  // namespace phub::config::test
