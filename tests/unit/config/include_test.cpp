// include(): files below the config's directory, run in the same sandbox under one budget; every refusal.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

namespace fs = std::filesystem;

// A fresh directory holding the config ("conf/") and a sibling outside it ("outside/"), removed afterwards.
class IncludeDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "phub-include-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    top_ = tmpl;
    fs::create_directories(top_ / "conf");
    fs::create_directories(top_ / "outside");
  }
  void TearDown() override { fs::remove_all(top_); }

  // Writes `text` to conf/<rel> (or to <top>/<rel> when outside), creating directories.
  fs::path write(const std::string& rel, std::string_view text, bool outside = false) {
    fs::path p = top_ / (outside ? "outside" : "conf") / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
    return p;
  }
  fs::path conf(const std::string& rel = "") const { return top_ / "conf" / rel; }

  // Writes conf/hub.lua as the base config with `patch` and loads it.
  Expected<Config, std::string> load_hub(std::string_view patch, const LoadLimits& limits = {}) {
    return load_file(write("hub.lua", patched(patch)).string(), limits);
  }
  // The error of a hub.lua that must fail to load.
  std::string hub_error(std::string_view patch, const LoadLimits& limits = {}) {
    auto r = load_hub(patch, limits);
    EXPECT_FALSE(r.has_value()) << "loaded, but should have failed: " << patch;
    return r.has_value() ? std::string() : r.error();
  }
  void expect_refused(std::string_view patch, std::string_view fragment) {
    std::string error = hub_error(patch);
    EXPECT_NE(error.find(fragment), std::string::npos) << "patch: " << patch << "\nerror: " << error;
  }

  fs::path top_;
};

TEST_F(IncludeDir, ReturnsTheValueOfAFileBesideTheConfig) {
  write("args.lua", "local n = 2\nreturn { '--n', tostring(n) }\n");
  auto cfg = load_hub("cfg.eal_args = include('args.lua')");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  EXPECT_EQ(cfg->eal_args, (std::vector<std::string>{"--n", "2"}));
}

TEST_F(IncludeDir, NestedPathsResolveAgainstTheIncludingFile) {
  write("sub/a.lua", "return { include('b.lua')[1], include('deeper/c.lua') }");
  write("sub/b.lua", "return { 'from-b' }");
  write("sub/deeper/c.lua", "return 'from-c'");
  write("b.lua", "return { 'wrong b: beside the config, not beside sub/a.lua' }");
  auto cfg = load_hub("cfg.eal_args = include('sub/a.lua')");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  EXPECT_EQ(cfg->eal_args, (std::vector<std::string>{"from-b", "from-c"}));
}

TEST_F(IncludeDir, IncludedFilesRunInTheSameSandbox) {
  write("escape.lua", "return io.open('/etc/passwd')");
  expect_refused("include('escape.lua')", "attempt to index a nil value (global 'io')");
  write("globals.lua", "shared = 5; return include ~= nil and os == nil and require == nil");
  auto cfg = load_hub("assert(include('globals.lua') == true and shared == 5)");
  EXPECT_TRUE(cfg.has_value()) << cfg.error();
}

TEST_F(IncludeDir, ErrorsNameTheIncludingLineAndTheIncludedFile) {
  write("bad.lua", "local x = 1\nreturn nil + x\n");
  std::string error = hub_error("local ok = 1\ninclude('bad.lua')");
  EXPECT_NE(error.find("hub.lua:13: include \"bad.lua\": "), std::string::npos) << error;
  EXPECT_NE(error.find("/conf/bad.lua:2: attempt to perform arithmetic on a nil value"), std::string::npos) << error;
  write("syntax.lua", "return {\n");
  error = hub_error("include('syntax.lua')");
  EXPECT_NE(error.find("hub.lua:12: include \"syntax.lua\": "), std::string::npos) << error;
  EXPECT_NE(error.find("syntax.lua:2:"), std::string::npos) << error;
}

TEST_F(IncludeDir, PathRefusals) {
  write("ok.lua", "return {}");
  write("secret.lua", "return { 'outside' }", true);
  expect_refused("include('')", "include \"\": an empty path");
  expect_refused("include('" + conf("ok.lua").string() + "')", ": an absolute path");
  expect_refused("include('../outside/secret.lua')", "include \"../outside/secret.lua\": a path with \"..\"");
  expect_refused("include('sub/../ok.lua')", "a path with \"..\"");
  expect_refused("include('ok.lua\\0x')", "a path with a NUL byte");
  expect_refused("include(string.rep('a', 1025))", "a path longer than 1024 bytes");
  expect_refused("include('missing.lua')", "include \"missing.lua\": cannot resolve: No such file or directory");
  expect_refused("include(7)", "bad argument #1 to 'include' (string expected, got number)");
}

TEST_F(IncludeDir, SymlinksMayNotLeaveTheConfigsDirectory) {
  write("secret.lua", "return { 'outside' }", true);
  fs::create_symlink(top_ / "outside" / "secret.lua", conf("link.lua"));
  fs::create_directory_symlink(top_ / "outside", conf("linkdir"));
  expect_refused("include('link.lua')", "include \"link.lua\": resolves to a file outside the config's directory");
  expect_refused("include('linkdir/secret.lua')", "resolves to a file outside the config's directory");
  // A symlink that stays inside is followed.
  write("real.lua", "return { 'inside' }");
  fs::create_symlink("real.lua", conf("alias.lua"));
  auto cfg = load_hub("cfg.eal_args = include('alias.lua')");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  EXPECT_EQ(cfg->eal_args, (std::vector<std::string>{"inside"}));
}

TEST_F(IncludeDir, OnlyRegularTextFilesOfBoundedSize) {
  fs::create_directories(conf("dir.lua"));
  expect_refused("include('dir.lua')", "include \"dir.lua\": not a regular file");
  ASSERT_EQ(::mkfifo(conf("fifo.lua").c_str(), 0600), 0);
  expect_refused("include('fifo.lua')", "include \"fifo.lua\": not a regular file");  // and does not block
  write("big.lua", "return {}\n" + std::string((1u << 20) - 9, '-'));
  expect_refused("include('big.lua')", "include \"big.lua\": the file has 1048577 bytes, more than the 1048576");
  write("bytecode.lua", std::string_view("\x1bLuaT\x00\x19\x93\r\n\x1a\n", 12));
  expect_refused("include('bytecode.lua')", "attempt to load a binary chunk");
  LoadLimits small;
  small.max_memory_bytes = 512u << 10;
  write("half.lua", "return {}\n" + std::string(600u << 10, '-'));
  std::string error = hub_error("include('half.lua')", small);
  EXPECT_NE(error.find("more than the 524288 an included file may have"), std::string::npos) << error;
}

TEST_F(IncludeDir, CyclesDepthAndCountAreBounded) {
  write("a.lua", "return include('b.lua')");
  write("b.lua", "return include('a.lua')");
  expect_refused("include('a.lua')", "a.lua:1: include \"b.lua\": " + conf("b.lua").string() +
                                         ":1: include \"a.lua\": a cycle: \"a.lua\" -> \"b.lua\" -> \"a.lua\"");
  expect_refused("include('hub.lua')", "include \"hub.lua\": a cycle: \"hub.lua\" -> \"hub.lua\"");
  for (int i = 1; i <= 9; ++i) write("d" + std::to_string(i) + ".lua", "return include('d" + std::to_string(i + 1) + ".lua')");
  write("d10.lua", "return 1");
  expect_refused("include('d1.lua')", "include \"d9.lua\": includes nested deeper than 8 files");
  write("d3.lua", "return 1");
  EXPECT_TRUE(load_hub("assert(include('d1.lua') == 1)").has_value());  // 3 deep is fine
  write("one.lua", "return 1");
  EXPECT_TRUE(load_hub("for i = 1, 64 do include('one.lua') end").has_value());
  expect_refused("for i = 1, 65 do include('one.lua') end", "more than 64 files included by one config");
}

TEST_F(IncludeDir, ARefusalIsCatchableAndLeavesNothingOpen) {
  write("once.lua", "if not tried then tried = true; error('first run fails') end\nreturn 1");
  write("a.lua", "return include('b.lua')");
  write("b.lua", "return include('a.lua')");
  auto cfg = load_hub(R"lua(
    local ok, err = pcall(include, 'once.lua')
    assert(not ok and err:find('first run fails', 1, true))
    assert(include('once.lua') == 1)  -- refused as a cycle if the failed run had left once.lua open
    ok, err = pcall(include, 'a.lua')
    assert(not ok and err:find('a cycle', 1, true))
    assert(select(2, pcall(include, 'b.lua')):find('a cycle: "b.lua" -> "a.lua" -> "b.lua"', 1, true))
  )lua");
  EXPECT_TRUE(cfg.has_value()) << cfg.error();
}

TEST_F(IncludeDir, OneBudgetForTheWholeLoad) {
  LoadLimits limits;
  limits.max_instructions = 1'000'000;
  write("spin.lua", "for i = 1, 600000 do end\nreturn 1");
  EXPECT_TRUE(load_hub("include('spin.lua')", limits).has_value());
  std::string error = hub_error("include('spin.lua'); include('spin.lua')", limits);
  EXPECT_NE(error.find("config script exceeded 1000000 instructions"), std::string::npos) << error;
  EXPECT_NE(error.find("spin.lua:1:"), std::string::npos) << error;
  error = hub_error("pcall(include, 'spin.lua'); pcall(include, 'spin.lua'); cfg.eal_args = 'caught'", limits);
  EXPECT_NE(error.find("config script exceeded 1000000 instructions"), std::string::npos) << error;
  LoadLimits memory;
  memory.max_memory_bytes = 4u << 20;
  write("grow.lua", "local t = {} for i = 1, 1e7 do t[i] = i end return t");
  error = hub_error("local ok = pcall(include, 'grow.lua')", memory);
  EXPECT_NE(error.find("config script exceeded 4194304 bytes of memory"), std::string::npos) << error;
}

TEST_F(IncludeDir, EachLoadReadsTheIncludedFileAgain) {
  write("args.lua", "return { 'first' }");
  auto a = load_hub("cfg.eal_args = include('args.lua')");
  write("args.lua", "return { 'second' }");
  auto b = load_file(conf("hub.lua").string());
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->eal_args, (std::vector<std::string>{"first"}));
  EXPECT_EQ(b->eal_args, (std::vector<std::string>{"second"}));
}

TEST(Include, NotAvailableToTextInMemory) {
  std::string error = load_error(patched("include('racks.lua')"));
  EXPECT_NE(error.find("test.lua:12: include: only a config loaded from a file can include files"), std::string::npos)
      << error;
}

}  // namespace
}  // namespace phub::config::test
