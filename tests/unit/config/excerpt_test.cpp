// Error messages quote bounded excerpts of keys, values, names and path segments: a config with 10 MB
// keys and strings gets short messages that still say where and what.
#include <sstream>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

constexpr size_t kTenMiB = 10u << 20;
constexpr size_t kMaxLineBytes = 300;

// Every line of `error` is at most kMaxLineBytes; the whole message contains each fragment.
void expect_short(const std::string& error, std::initializer_list<std::string_view> fragments) {
  ASSERT_FALSE(error.empty());
  EXPECT_LT(error.size(), 20 * kMaxLineBytes) << error.substr(0, 2000);
  std::istringstream lines(error);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), kMaxLineBytes) << line.substr(0, 2000);
  }
  for (std::string_view f : fragments) EXPECT_NE(error.find(f), std::string::npos) << f << "\nin: " << error;
}

std::string ten_mib_patch(std::string_view lua_statements) {
  return patched("local big = string.rep('k', " + std::to_string(kTenMiB) + ")\n" + std::string(lua_statements));
}

TEST(Excerpt, HugeKeyIsQuotedShort) {
  expect_short(load_error(ten_mib_patch("cfg[big] = 1")),
               {"test.lua: [\"kkkkkkkk", "... (10485760 bytes)]: unknown key"});
  expect_short(load_error(ten_mib_patch("cfg.jobs[1][big] = 1")),
               {"test.lua: jobs[1][\"kkkk", "(10485760 bytes)]: unknown key"});
  // A key that is not an identifier is quoted anyway; a long one is cut the same way.
  expect_short(load_error(ten_mib_patch("cfg.polling = { [big .. '-x'] = 1 }")),
               {"polling[\"kkkk", "(10485762 bytes)]: unknown key"});
}

TEST(Excerpt, HugeStringValueIsQuotedShort) {
  expect_short(load_error(ten_mib_patch("cfg.jobs[1].mode = big")),
               {"jobs[1].mode: \"kkkk", "... (10485760 bytes) is not one of \"allreduce\", \"ps\""});
  expect_short(load_error(ten_mib_patch("cfg.ports[1].name = big")), {"ports[1].name: \"kkkk", "is not a name"});
  expect_short(load_error(ten_mib_patch("cfg.ports[1].ipv4 = big")), {"ports[1].ipv4: \"kkkk", "is not an IPv4"});
  expect_short(load_error(ten_mib_patch("cfg.control = { socket_path = big }")),
               {"control.socket_path: \"kkkk", "is not 1..107 bytes"});
  expect_short(load_error(ten_mib_patch("cfg.lcores[1].ports = { big }")),
               {"lcores[1].ports[1]: \"kkkk", "(10485760 bytes) is not a port name"});
  expect_short(load_error(ten_mib_patch("cfg.jobs[1].secret = big")),
               {"jobs[1].secret: a secret of 10485760 bytes is longer than 1024"});
}

TEST(Excerpt, LongTablePathIsShort) {
  std::string error = load_error(ten_mib_patch(
      "cfg.racks = { { name = 'r', hub_ipv4 = '198.18.0.1' } }\ncfg.rack = 'r'\n"
      "cfg.jobs[1].ranks_by_rack = { [big] = { 'zero' } }"));
  expect_short(error, {"jobs[1].ranks_by_rack[\"kkkk", "(10485760 bytes)][1]: expected integer, got string"});
}

TEST(Excerpt, ManyHugeErrorsStayShortAndCounted) {
  std::string error = load_error(ten_mib_patch("for i = 1, 3 do cfg[big .. i] = big end"));
  expect_short(error, {"unknown key"});
}

TEST(Excerpt, ScriptErrorsAreShort) {
  // The message is the position and the 10 MiB string: 10485773 bytes, cut.
  expect_short(load_error(ten_mib_patch("error(big)")), {"test.lua:13: kkkk", "... (10485773 bytes)"});
  // Lua's own message names a 1 MiB field written in the source.
  std::string source = "local t = {}\nt." + std::string(1u << 20, 'f') + "()\nreturn {}";
  expect_short(load_error(source), {"test.lua:2: attempt to call a nil value (field 'ffff", "bytes)"});
  // A syntax error quotes the token it stopped at: here a 1 MiB unfinished string.
  expect_short(load_error("x = '" + std::string(1u << 20, 'g') + "\nreturn {}"),
               {"test.lua:1: unfinished string near ''gggg", "bytes)"});
  // An error object that is a huge number-like string.
  expect_short(load_error(ten_mib_patch("error(big, 0)")), {"kkkk", "bytes"});
}

TEST(Excerpt, HugeFileIsRefusedWithoutReadingIt) {
  LoadLimits small;
  small.max_memory_bytes = 1u << 20;
  auto cfg = load_string(std::string(2u << 20, ' ') + "return {}", "test.lua", small);
  ASSERT_FALSE(cfg.has_value());
  expect_short(cfg.error(), {"test.lua: ", "2097161 bytes", "1048576"});
}

}  // namespace
}  // namespace phub::config::test
