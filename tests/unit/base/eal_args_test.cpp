// EAL arguments (phub/base/eal_args.hpp): splitting, joining, a distinct --file-prefix, finding it, the
// runtime directory a process may remove, argc/argv.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <map>
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

TEST(EalArgs, OptionValuesInOrder) {
  EXPECT_EQ(eal_option_values({"-l", "0", "--lcores=1@2", "-l3"}, {"-l", "--lcores"}), (Args{"0", "1@2", "3"}));
  EXPECT_EQ(eal_option_values({"--no-huge"}, {"-l"}), Args{});
}

using Cpus = std::vector<unsigned>;

TEST(CpuList, RangesAndSingles) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (Cpus{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), (Cpus{5}));
  EXPECT_EQ(parse_cpu_list("3-1,2"), (Cpus{1, 2, 3}));  // downwards, and each once
  EXPECT_EQ(parse_cpu_list("1023"), (Cpus{1023}));
  for (const char* bad : {"", ",", "1,", "a", "1-", "-1", "1--2", "1024", "0-1024", " 1", "1 ", "0x1", "+1"}) {
    EXPECT_EQ(parse_cpu_list(bad), std::nullopt) << bad;
  }
}

using LcoreCpus = std::map<unsigned, std::vector<unsigned>>;

LcoreCpus mapped(const Args& args) {
  auto m = lcore_cpus(args);
  if (!m || !*m) {
    ADD_FAILURE() << (m ? "no lcores named" : m.error());
    return {};
  }
  return **m;
}

TEST(LcoreCpus, ListAndMaskRunLcoreIOnCpuI) {
  EXPECT_EQ(mapped({"-l", "0-2,5"}), (LcoreCpus{{0, {0}}, {1, {1}}, {2, {2}}, {5, {5}}}));
  EXPECT_EQ(mapped({"-l1,3"}), (LcoreCpus{{1, {1}}, {3, {3}}}));
  EXPECT_EQ(mapped({"-c", "0x13"}), (LcoreCpus{{0, {0}}, {1, {1}}, {4, {4}}}));
  EXPECT_EQ(mapped({"-c", "A0"}), (LcoreCpus{{5, {5}}, {7, {7}}}));
}

TEST(LcoreCpus, LcoresMapsAsTheEalDoes) {
  // The EAL guide's example: a group without @ runs each of its lcores on all of its CPUs, a range each on its own.
  EXPECT_EQ(mapped({"--lcores", "1,2@(5-7),(3-5)@(0,2),(0,6),7-8"}),
            (LcoreCpus{{0, {0, 6}}, {1, {1}}, {2, {5, 6, 7}}, {3, {0, 2}}, {4, {0, 2}}, {5, {0, 2}}, {6, {0, 6}},
                       {7, {7}}, {8, {8}}}));
  EXPECT_EQ(mapped({"--lcores=(0-2)@1"}), (LcoreCpus{{0, {1}}, {1, {1}}, {2, {1}}}));
  EXPECT_EQ(mapped({"--lcores", "(0-2)@(0,1)"}), (LcoreCpus{{0, {0, 1}}, {1, {0, 1}}, {2, {0, 1}}}));
  EXPECT_EQ(mapped({"--lcores", "0@0,1@2,2@3"}), (LcoreCpus{{0, {0}}, {1, {2}}, {2, {3}}}));
  EXPECT_EQ(mapped({"--lcores", "4@2-3"}), (LcoreCpus{{4, {2, 3}}}));
  EXPECT_EQ(mapped({"--lcores", "1@2,1@3"}), (LcoreCpus{{1, {3}}}));  // the later element wins
}

TEST(LcoreCpus, NoneNamedMeansEveryCpu) {
  auto m = lcore_cpus({"--no-huge", "-m", "512", "--log-level", "lib.eal:warning"});
  ASSERT_TRUE(m.has_value()) << m.error();
  EXPECT_EQ(*m, std::nullopt);
}

TEST(LcoreCpus, WrongValuesAndTwoOptionsAreRefused) {
  for (const Args& args : {Args{"-l", "0-x"}, Args{"-c", "0xg"}, Args{"-c", ""}, Args{"--lcores", "1@"},
                           Args{"--lcores", "(1,2"}, Args{"--lcores", "1,,2"}, Args{"--lcores", "((1))"},
                           Args{"--lcores", "1@(2)3"}, Args{"--lcores", "2000"}}) {
    auto m = lcore_cpus(args);
    ASSERT_FALSE(m.has_value()) << args[0] << " " << args[1];
    EXPECT_NE(m.error().find("eal_args: " + args[0] + " '" + args[1] + "'"), std::string::npos) << m.error();
  }
  auto two = lcore_cpus({"-l", "0-1", "--lcores", "0@0"});
  ASSERT_FALSE(two.has_value());
  EXPECT_NE(two.error().find("only one of them"), std::string::npos) << two.error();
  EXPECT_FALSE(lcore_cpus({"-l", "0", "-l", "1"}).has_value());
}

}  // namespace
}  // namespace phub
