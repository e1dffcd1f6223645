// DPDK EAL arguments as text (no DPDK): split from one string, joined for messages, a distinct
// --file-prefix per process, and the argc/argv that rte_eal_init takes (phub/drivers/eal.hpp starts it).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace phub {

// "--no-huge  --no-pci -m 512" -> {"--no-huge", "--no-pci", "-m", "512"} (split at spaces, tabs and newlines).
[[nodiscard]] std::vector<std::string> split_eal_args(std::string_view text);
// The arguments with single spaces between them, for messages.
[[nodiscard]] std::string join_eal_args(const std::vector<std::string>& args);
// Unless `args` already name one, appends "--file-prefix=<stem>-<pid>": each process its own runtime
// directory, so that processes running side by side (tests) share no memory files or sockets.
void add_file_prefix(std::vector<std::string>& args, std::string_view stem);

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
