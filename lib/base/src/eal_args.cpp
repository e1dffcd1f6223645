// EAL arguments: splitting, joining, the per-process file prefix, argc/argv.
#include "phub/base/eal_args.hpp"

#include <unistd.h>

#include <algorithm>

namespace phub {

std::vector<std::string> split_eal_args(std::string_view text) {
  constexpr std::string_view kSpace = " \t\n";
  std::vector<std::string> out;
  for (size_t start = text.find_first_not_of(kSpace); start != std::string_view::npos;
       start = text.find_first_not_of(kSpace, start)) {
    const size_t end = std::min(text.find_first_of(kSpace, start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

std::string join_eal_args(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) out += (out.empty() ? "" : " ") + a;
  return out;
}

void add_file_prefix(std::vector<std::string>& args, std::string_view stem) {
  for (const auto& a : args) {
    if (a == "--file-prefix" || a.starts_with("--file-prefix=")) return;
  }
  args.push_back("--file-prefix=" + std::string(stem) + "-" + std::to_string(getpid()));
}

std::optional<std::string> eal_option_value(const std::vector<std::string>& args,
                                            std::initializer_list<std::string_view> names) {
  std::optional<std::string> value;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    for (const std::string_view n : names) {
      const bool long_name = n.starts_with("--");
      if (a == n && i + 1 < args.size()) {
        value = args[++i];
        break;
      }
      if (long_name && a.size() > n.size() && a.starts_with(n) && a[n.size()] == '=') {
        value = std::string(a.substr(n.size() + 1));
      } else if (!long_name && a.size() > n.size() && a.starts_with(n)) {
        value = std::string(a.substr(n.size()));
      }
    }
  }
  return value;
}

std::optional<std::string> file_prefix_of(const std::vector<std::string>& args) {
  return eal_option_value(args, {"--file-prefix"});
}

bool is_own_runtime_dir(std::string_view dir, std::string_view prefix) {
  if (prefix.empty() || prefix == "." || prefix == ".." || prefix.find('/') != std::string_view::npos) return false;
  return dir.size() == kDpdkRuntimeRoot.size() + 1 + prefix.size() && dir.starts_with(kDpdkRuntimeRoot) &&
         dir[kDpdkRuntimeRoot.size()] == '/' && dir.ends_with(prefix);
}

EalArgv::EalArgv(std::string_view program, const std::vector<std::string>& args) {
  words_.reserve(args.size() + 1);
  words_.emplace_back(program);
  words_.insert(words_.end(), args.begin(), args.end());
  pointers_.reserve(words_.size() + 1);
  for (auto& w : words_) pointers_.push_back(w.data());
  pointers_.push_back(nullptr);
}

}  // namespace phub
