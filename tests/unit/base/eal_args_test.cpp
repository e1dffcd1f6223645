// EAL arguments (phub/base/eal_args.hpp): splitting, joining, a distinct --file-prefix, finding it, the
// runtime directory a process may remove, argc/argv.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "phub/base/eal_args.hpp"

namespace phub {
namespace {

using Args = std::vector<std::string>;

TEST(EalArgs, SplitsAtWhiteSpace) {
  EXPECT_EQ(split_eal_args("--no-huge --no-pci -m 512"), (Args{"--no-huge", "--no-pci", "-m", "512"}));
  EXPECT_EQ(split_eal_args("  -l 0\t--lcores (0-2)@1\n "), (Args{"-l", "0", "--lcores", "(0-2)@1"}));
  EXPECT_EQ(split_eal_args(""), Args{});
  EXPECT_EQ(split_eal_args(" \t\n"), Args{});
  EXPECT_EQ(join_eal_args({"--no-huge", "-m", "512"}), "--no-huge -m 512");
  EXPECT_EQ(join_eal_args({}), "");
}

TEST(EalArgs, AddsAFilePrefixOfThisProcessUnlessOneIsGiven) {
  Args a{"--no-huge"};
  add_file_prefix(a, "phub-test");
  EXPECT_EQ(a, (Args{"--no-huge", "--file-prefix=phub-test-" + std::to_string(getpid())}));
  add_file_prefix(a, "other");  // already has one
  EXPECT_EQ(a.size(), 2u);
  Args b{"--file-prefix", "mine", "-m", "128"};
  add_file_prefix(b, "phub-test");
  EXPECT_EQ(b, (Args{"--file-prefix", "mine", "-m", "128"}));
  Args c{"--file-prefix=mine"};
  add_file_prefix(c, "phub-test");
  EXPECT_EQ(c, Args{"--file-prefix=mine"});
}

TEST(EalArgs, FindsTheFilePrefixInEitherFormTheLastOneWinning) {
  EXPECT_EQ(file_prefix_of({"--no-huge", "--file-prefix", "p1", "-m", "128"}), "p1");
  EXPECT_EQ(file_prefix_of({"--file-prefix=p2"}), "p2");
  EXPECT_EQ(file_prefix_of({"--file-prefix=p1", "--file-prefix", "p3"}), "p3");
  EXPECT_EQ(file_prefix_of({"--no-huge", "-m", "128"}), std::nullopt);
  EXPECT_EQ(file_prefix_of({"--file-prefix"}), std::nullopt);  // no value: the EAL refuses it
  EXPECT_EQ(file_prefix_of({"--file-prefixes=x"}), std::nullopt);
}

TEST(EalArgs, OwnRuntimeDirIsExactlyTheRootAndOnePlainComponent) {
  EXPECT_TRUE(is_own_runtime_dir("/var/run/dpdk/phub-7", "phub-7"));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/phub-7", "phub-8"));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/xphub-7", "phub-7"));
  EXPECT_FALSE(is_own_runtime_dir("/tmp/dpdk/phub-7", "phub-7"));  // a non-root process's: not under the root
  EXPECT_FALSE(is_own_runtime_dir("/run/user/0/dpdk/phub-7", "phub-7"));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk", ""));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/", ""));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/..", ".."));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/.", "."));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdk/a/b", "a/b"));
  EXPECT_FALSE(is_own_runtime_dir("/var/run/dpdkXphub", "phub"));
}

TEST(EalArgs, ArgvHasTheProgramTheArgumentsAndANullEnd) {
  const Args args{"--no-huge", "-m", "512"};
  EalArgv argv("phub-x", args);
  ASSERT_EQ(argv.argc(), 4);
  EXPECT_STREQ(argv.argv()[0], "phub-x");
  for (size_t i = 0; i < args.size(); ++i) EXPECT_STREQ(argv.argv()[i + 1], args[i].c_str());
  EXPECT_EQ(argv.argv()[4], nullptr);
  // The strings belong to the EalArgv (rte_eal_init may keep pointers to them): a copy, not the caller's.
  EXPECT_NE(argv.argv()[1], args[0].c_str());
  EalArgv none("phub-x", {});
  EXPECT_EQ(none.argc(), 1);
  EXPECT_EQ(none.argv()[1], nullptr);
}

TEST(EalArgs, OptionValueInEverySpelling) {
  const std::vector<std::string> args = {"--no-huge", "-m", "256", "--socket-mem=1024,0", "-l", "0-3"};
  EXPECT_EQ(eal_option_value(args, {"-m", "--memory"}), "256");
  EXPECT_EQ(eal_option_value(args, {"--socket-mem"}), "1024,0");
  EXPECT_EQ(eal_option_value(args, {"-l"}), "0-3");
  EXPECT_EQ(eal_option_value({"-m512"}, {"-m"}), "512");
  EXPECT_EQ(eal_option_value({"--memory", "64", "-m", "128"}, {"-m", "--memory"}), "128");  // the last one
  EXPECT_EQ(eal_option_value(args, {"--huge-dir"}), std::nullopt);
  EXPECT_EQ(eal_option_value({"-m"}, {"-m"}), std::nullopt);  // no value after it
  EXPECT_EQ(eal_option_value({"--socket-memory=5"}, {"--socket-mem"}), std::nullopt);
}

}  // namespace
}  // namespace phub
