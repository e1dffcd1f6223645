// DPDK EAL arguments as text (no DPDK): split from one string, joined for messages, a distinct
// --file-prefix per process, and the argc/argv that rte_eal_init takes (phub/drivers/eal.hpp starts it).
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"

namespace phub {

// "--no-huge  --no-pci -m 512" -> {"--no-huge", "--no-pci", "-m", "512"} (split at spaces, tabs and newlines).
[[nodiscard]] std::vector<std::string> split_eal_args(std::string_view text);
// The arguments with single spaces between them, for messages.
[[nodiscard]] std::string join_eal_args(const std::vector<std::string>& args);
// Unless `args` already name one, appends "--file-prefix=<stem>-<pid>": each process its own runtime
// directory, so that processes running side by side (tests) share no memory files or sockets.
void add_file_prefix(std::vector<std::string>& args, std::string_view stem);
// The value of the last of `names` in `args`, as the EAL reads options: a long name as "--name V" or
// "--name=V", a short one as "-m V" or "-mV". None if no name is there.
[[nodiscard]] std::optional<std::string> eal_option_value(const std::vector<std::string>& args,
                                                          std::initializer_list<std::string_view> names);
// Every value of `names` in `args`, in order, read as eal_option_value reads one.
[[nodiscard]] std::vector<std::string> eal_option_values(const std::vector<std::string>& args,
                                                         std::initializer_list<std::string_view> names);

// The highest CPU or lcore number a list may name: CPU_SETSIZE - 1 (the EAL's cpusets hold no more).
inline constexpr unsigned kMaxCpu = 1023;
// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}: a CPU list as -l takes one and sysfs's cpulist files write one
// (a range may run downwards, as the EAL reads it); sorted, each once. None for anything else, or a
// number above kMaxCpu.
[[nodiscard]] std::optional<std::vector<unsigned>> parse_cpu_list(std::string_view text);

// The CPUs each lcore runs on, as rte_eal_init maps them from the one of -l, -c and --lcores that `args` give:
// lcore id -> its CPUs, sorted. -l 0-3 and -c 0xf run lcore i on CPU i; --lcores 1@2,(3-4)@(5,6),7-8,(9,10)
// runs lcore 1 on CPU 2, lcores 3 and 4 each on CPUs 5 and 6, lcores 7 and 8 each on its own CPU, and lcores 9
// and 10 each on CPUs 9 and 10. None where `args` give none of them: the EAL then runs lcore i on CPU i for
// every CPU of the machine. Two of them, or a value the EAL would not take, is an error naming it.
[[nodiscard]] Expected<std::optional<std::map<unsigned, std::vector<unsigned>>>, std::string> lcore_cpus(
    const std::vector<std::string>& args);
// The --file-prefix that `args` name ("--file-prefix=P" or "--file-prefix" "P"; the last one wins, as in the
// EAL); none if they name none (the EAL then uses "rte", a prefix no phub program made for itself).
[[nodiscard]] std::optional<std::string> file_prefix_of(const std::vector<std::string>& args);

// Where a root process's EAL keeps its runtime directories: <this>/<file-prefix>.
inline constexpr std::string_view kDpdkRuntimeRoot = "/var/run/dpdk";
// True if `dir` (rte_eal_get_runtime_dir()) is exactly kDpdkRuntimeRoot/<prefix> and `prefix` is one plain
// path component (not empty, no '/', not "." or ".."): the runtime directory a process started with
// --file-prefix `prefix` made for itself, and the only one it may remove at exit.
[[nodiscard]] bool is_own_runtime_dir(std::string_view dir, std::string_view prefix);

// argc/argv over a program name and its arguments, argv[argc] == nullptr. The strings are copies that live
// as long as this object; rte_eal_init may reorder the pointers, never the strings they point to.
class EalArgv {
 public:
  EalArgv(std::string_view program, const std::vector<std::string>& args);
  EalArgv(const EalArgv&) = delete;
  EalArgv& operator=(const EalArgv&) = delete;

  [[nodiscard]] int argc() const noexcept { return static_cast<int>(words_.size()); }
  [[nodiscard]] char** argv() noexcept { return pointers_.data(); }

 private:
  std::vector<std::string> words_;
  std::vector<char*> pointers_;
};

}  // namespace phub
