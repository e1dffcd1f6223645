// EAL arguments: splitting, joining, the per-process file prefix, argc/argv.
#include "phub/base/eal_args.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>

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

std::vector<std::string> eal_option_values(const std::vector<std::string>& args,
                                           std::initializer_list<std::string_view> names) {
  std::vector<std::string> values;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    for (const std::string_view n : names) {
      const bool long_name = n.starts_with("--");
      if (a == n && i + 1 < args.size()) {
        values.push_back(args[++i]);
        break;
      }
      if (long_name && a.size() > n.size() && a.starts_with(n) && a[n.size()] == '=') {
        values.emplace_back(a.substr(n.size() + 1));
      } else if (!long_name && a.size() > n.size() && a.starts_with(n)) {
        values.emplace_back(a.substr(n.size()));
      }
    }
  }
  return values;
}

std::optional<std::string> eal_option_value(const std::vector<std::string>& args,
                                            std::initializer_list<std::string_view> names) {
  auto values = eal_option_values(args, names);
  if (values.empty()) return std::nullopt;
  return std::move(values.back());
}

namespace {

std::optional<unsigned> cpu_number(std::string_view text) {
  unsigned v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v > kMaxCpu) return std::nullopt;
  return v;
}

// "3" or "2-5" (or "5-2"): the CPUs it names, ascending.
std::optional<std::vector<unsigned>> cpu_range(std::string_view text) {
  const size_t dash = text.find('-');
  const auto first = cpu_number(text.substr(0, dash));
  const auto last = dash == std::string_view::npos ? first : cpu_number(text.substr(dash + 1));
  if (!first || !last) return std::nullopt;
  std::vector<unsigned> out;
  for (unsigned c = std::min(*first, *last); c <= std::max(*first, *last); ++c) out.push_back(c);
  return out;
}

// One set of --lcores: "3", "2-5" or "(1,4-6)"; `group` says which it was.
std::optional<std::vector<unsigned>> lcores_set(std::string_view text, bool& group) {
  group = text.starts_with('(');
  if (!group) return cpu_range(text);
  if (text.size() < 2 || !text.ends_with(')')) return std::nullopt;
  return parse_cpu_list(text.substr(1, text.size() - 2));
}

Expected<std::map<unsigned, std::vector<unsigned>>, std::string> parse_lcores_map(std::string_view text) {
  std::map<unsigned, std::vector<unsigned>> out;
  const auto bad = [&] {
    return unexpected("eal_args: --lcores '" + std::string(text) +
                      "' is not a list of lcore sets each with an optional @cpu set, such as 1@2,(3-4)@(5,6),7-8");
  };
  size_t start = 0;
  while (start <= text.size()) {
    // An element ends at the first comma outside parentheses.
    size_t end = start;
    int depth = 0;
    for (; end < text.size() && (depth > 0 || text[end] != ','); ++end) {
      depth += text[end] == '(' ? 1 : text[end] == ')' ? -1 : 0;
      if (depth < 0 || depth > 1) return bad();
    }
    if (depth != 0) return bad();
    const std::string_view element = text.substr(start, end - start);
    const size_t at = element.find('@');
    bool group = false, cpu_group = false;
    const auto lcores = lcores_set(element.substr(0, at), group);
    if (!lcores) return bad();
    std::optional<std::vector<unsigned>> cpus;
    if (at != std::string_view::npos) {
      cpus = lcores_set(element.substr(at + 1), cpu_group);
      if (!cpus) return bad();
    } else if (group) {
      cpus = lcores;  // a group without @: each of its lcores on all of its CPUs
    }
    for (const unsigned l : *lcores) out[l] = cpus ? *cpus : std::vector<unsigned>{l};
    start = end + 1;
  }
  return out;
}

}  // namespace

std::optional<std::vector<unsigned>> parse_cpu_list(std::string_view text) {
  std::vector<unsigned> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    auto range = cpu_range(text.substr(start, comma - start));
    if (!range) return std::nullopt;
    out.insert(out.end(), range->begin(), range->end());
    start = comma + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Expected<std::optional<std::map<unsigned, std::vector<unsigned>>>, std::string> lcore_cpus(
    const std::vector<std::string>& args) {
  const auto lists = eal_option_values(args, {"-l"}), masks = eal_option_values(args, {"-c"}),
             maps = eal_option_values(args, {"--lcores"});
  if (lists.size() + masks.size() + maps.size() > 1) {
    return unexpected(std::string(
        "eal_args: -l, -c and --lcores each say which lcores run, and the EAL takes only one of them, once"));
  }
  std::map<unsigned, std::vector<unsigned>> out;
  if (!lists.empty()) {
    const auto cpus = parse_cpu_list(lists[0]);
    if (!cpus) {
      return unexpected("eal_args: -l '" + lists[0] + "' is not a list of CPUs such as 0-3,8 (each at most " +
                        std::to_string(kMaxCpu) + ")");
    }
    for (const unsigned c : *cpus) out[c] = {c};
  } else if (!masks.empty()) {
    std::string_view hex = masks[0];
    if (hex.starts_with("0x") || hex.starts_with("0X")) hex.remove_prefix(2);
    const auto bad = [&] {
      return unexpected("eal_args: -c '" + masks[0] + "' is not a hexadecimal mask of CPUs 0 to " +
                        std::to_string(kMaxCpu));
    };
    if (hex.empty() || hex.size() > (kMaxCpu + 1) / 4) return bad();
    for (size_t i = 0; i < hex.size(); ++i) {
      const char ch = hex[hex.size() - 1 - i];
      unsigned digit = 0;
      const auto [end, ec] = std::from_chars(&ch, &ch + 1, digit, 16);
      if (ec != std::errc() || end != &ch + 1) return bad();
      for (unsigned b = 0; b < 4; ++b) {
        if ((digit >> b & 1) != 0) out[static_cast<unsigned>(4 * i + b)] = {static_cast<unsigned>(4 * i + b)};
      }
    }
  } else if (!maps.empty()) {
    auto map = parse_lcores_map(maps[0]);
    if (!map) return unexpected(map.error());
    out = std::move(*map);
  } else {
    return std::optional<std::map<unsigned, std::vector<unsigned>>>();
  }
  return std::optional(std::move(out));
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
