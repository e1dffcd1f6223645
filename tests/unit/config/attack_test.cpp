// The time limit holds against single library calls and costly instructions: each attack runs with the
// instruction budget off and a short wall-clock limit, and must stop soon after it with a message naming
// the limit. With the default limits each attack must fail as quickly, on whichever limit comes first.
// "Soon" is measured in the CPU time of the loading thread (the script runs on it): the work the attack got
// done, which the limit bounds. Wall time on a loaded 2-CPU machine adds the time spent waiting for a CPU (the
// sanitizer suite runs several test binaries at once), which says nothing about the sandbox.
#include <time.h>

#include <chrono>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_seconds() {
  timespec t{};
  (void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

constexpr uint32_t kWallMs = 100;
// How much CPU time past the wall-clock limit a load may still take: generous for a sanitizer build, far
// below what each attack costs without the sandbox's bounds (seconds to hours).
constexpr double kSlackSeconds = 0.9;

LoadLimits time_only(size_t memory_bytes = 64u << 20, uint32_t wall_ms = kWallMs) {
  LoadLimits l;
  l.max_instructions = 1ull << 60;  // effectively off: only the clock can stop the script
  l.max_memory_bytes = memory_bytes;
  l.max_wall_ms = wall_ms;
  return l;
}

// Loads `script` and expects it to fail with `fragment` within the wall-clock limit plus the slack.
void expect_stopped(std::string_view script, std::string_view fragment, const LoadLimits& limits) {
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  std::string error = load_error(script, limits);
  const double cpu_seconds = thread_cpu_seconds() - cpu0;
  const double wall_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(error.find(fragment), std::string::npos) << "script: " << script << "\nerror: " << error;
  double bound = (limits.max_wall_ms != 0 ? limits.max_wall_ms : 5000) / 1000.0 + kSlackSeconds;
  EXPECT_LT(cpu_seconds, bound) << "script: " << script << "\nerror: " << error << "\nwall " << wall_seconds << " s";
}

void expect_time_limit(std::string_view script, const LoadLimits& limits = time_only()) {
  expect_stopped(script, "ms of wall-clock time", limits);
}

// Under the default limits the same attack fails, on the instruction, memory or time limit.
void expect_any_limit(std::string_view script) { expect_stopped(script, "config script exceeded", LoadLimits{}); }

// %b scans to the end of the subject from every start: n^2/2 steps for n unbalanced '('.
constexpr std::string_view kBalance = "local s = string.rep('(', 200000)\nreturn { s:find('%b()') }";
// A plain find of "aaa...ab" in "aaa...a" compares the needle at every start: n * m / 2 bytes.
constexpr std::string_view kPlainFind =
    "local s, p = string.rep('a', 2000000), string.rep('a', 1000000) .. 'b'\nreturn { s:find(p, 1, true) }";
// Backtracking: every a* tries every split of the a's before the missing b fails.
constexpr std::string_view kBacktrack =
    "local s = string.rep('a', 300)\nreturn { s:match(string.rep('a*', 8) .. 'b') }";
// gsub and gmatch run the same matcher from every position.
constexpr std::string_view kGsub = "local s = string.rep('(', 200000)\nreturn { s:gsub('%b()', '') }";
constexpr std::string_view kGmatch =
    "local s = string.rep('(', 200000)\nfor x in s:gmatch('%b()') do end\nreturn {}";
// A precision makes string.format measure each string (strlen) and print none of it: 40000 x 16 MiB.
constexpr std::string_view kFormat =
    "local s, t = string.rep('x', 1 << 24), {}\nfor i = 1, 40000 do t[i] = s end\n"
    "return { string.format(string.rep('%.0s', #t), table.unpack(t)) }";
// The default comparison of 4000 references to one 16 MiB string: 48000 comparisons of 16 MiB.
constexpr std::string_view kSortDefault =
    "local s, t = string.rep('x', 1 << 24), {}\nfor i = 1, 4000 do t[i] = s end\ntable.sort(t)\nreturn {}";
// A comparator that costs one instruction but compares two 16 MiB strings.
constexpr std::string_view kSortComparator =
    "local a = string.rep('x', 1 << 26)\nlocal b = a:sub(2) .. 'y'\nlocal t = {}\n"
    "for i = 1, 4000 do t[i] = i end\ntable.sort(t, function(x, y) return a < b end)\nreturn {}";

TEST(Attack, BalancedPatternScanIsBounded) {
  expect_time_limit(kBalance);
  expect_any_limit(kBalance);
}

TEST(Attack, PlainFindIsBounded) {
  expect_time_limit(kPlainFind);
  expect_any_limit(kPlainFind);
}

TEST(Attack, BacktrackingPatternIsBounded) {
  // Its worst case saturates the count, past even the instruction budget that time_only() leaves.
  expect_stopped(kBacktrack, "config script exceeded", time_only());
  expect_any_limit(kBacktrack);
}

TEST(Attack, GsubAndGmatchAreBounded) {
  expect_time_limit(kGsub);
  expect_any_limit(kGsub);
  expect_time_limit(kGmatch);
  expect_any_limit(kGmatch);
}

TEST(Attack, FormatMeasuringStringsIsBounded) {
  expect_time_limit(kFormat);
  expect_any_limit(kFormat);
}

TEST(Attack, SortWithTheDefaultComparisonIsBounded) {
  expect_time_limit(kSortDefault);
  expect_any_limit(kSortDefault);
}

// Under the default limits this one runs into the 5 s clock, too slow for a unit test: time only.
TEST(Attack, SortWithAnExpensiveComparatorIsBounded) {
  expect_time_limit(kSortComparator, time_only(size_t{1} << 30, 500));
}

// With a large memory limit the linear library loops get long too: each must stop at the deadline.
TEST(Attack, LongLinearCallsStopAtTheDeadline) {
  LoadLimits big = time_only(size_t{2} << 30);
  // string.rep: 1.5 G copies of one byte.
  expect_time_limit("return { string.rep('x', 1500000000) }", big);
  // string.rep with empty copies and a separator.
  expect_time_limit("return { string.rep('', 1500000000, 'y') }", big);
  // table.move over a range of nils: no memory, only time.
  expect_time_limit("table.move({}, 1, 1 << 40, 1)", big);
  // load() of a huge chunk: the parser runs in C.
  expect_time_limit("local f = load(string.rep('x = 1 ', 20000000))\nreturn {}", big);
}

TEST(Attack, TableConcatOfAHugeTableIsBounded) {
  // 2 * 10^7 numbers, each turned into a string by concat. Building them takes a few hundred ms.
  LoadLimits big = time_only(size_t{1} << 30, 500);
  expect_stopped("local t = {}\nfor i = 1, 999999 do t[i] = 97 end\n"
                 "local u = {}\nfor i = 0, 19 do table.move(t, 1, #t, i * #t + 1, u) end\n"
                 "return { x = table.concat(u) .. table.concat(u) .. table.concat(u) }",
                 "ms of wall-clock time", big);
}

// Instructions that compare long strings: between two clock checks the VM may run many of them.
TEST(Attack, ComparingLongStringsInALoopIsBounded) {
  LoadLimits big = time_only(size_t{1} << 30, 500);
  expect_time_limit("local a = string.rep('x', 1 << 27)\nlocal b = a:sub(2) .. 'y'\n"
                    "while true do local _ = a < b end",
                    big);
}

}  // namespace
}  // namespace phub::config::test
