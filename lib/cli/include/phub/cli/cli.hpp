// Command lines of phub's tools on CLI11: one style of --help and of errors, and phub's value checks.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"

namespace phub::cli {

// An application whose --help (and -h) prints `synopsis` (the usage lines, "usage: tool ..."), the
// description, the options with their defaults, then the footer. A repeated option keeps its last value.
[[nodiscard]] std::unique_ptr<CLI::App> make_app(const std::string& synopsis, const std::string& description,
                                                 const std::string& footer = {});
// A subcommand's own --help synopsis, description and footer.
CLI::App* subcommand(CLI::App& app, const std::string& name, const std::string& synopsis,
                     const std::string& description, const std::string& footer = {});

struct Parsed {
  bool help = false;
  std::string help_text;  // with help: what --help prints (of the subcommand it was given to)
};

// Parses `args` (without the program name). A mistake comes back as a message that names the option or the
// argument, e.g. "unknown option '--sock'", "--timeout: 'soon' is not a number in (0, 86400]".
[[nodiscard]] Expected<Parsed, std::string> parse(CLI::App& app, std::vector<std::string> args);

// A tool's options: `make(o)` builds the application over `o`, whose `help` flag the parse sets.
template <class Options, class Make>
[[nodiscard]] Expected<Options, std::string> parse_options(Make make, std::vector<std::string> args, Options o = {}) {
  const auto app = make(o);
  auto parsed = parse(*app, std::move(args));
  if (!parsed) return unexpected(parsed.error());
  o.help = parsed->help;
  return o;
}
template <class Options, class Make>
[[nodiscard]] std::string help_text(Make make, Options o = {}) {
  return make(o)->help();
}

// The arguments before the first "--" and after it (`after` empty and `separated` false when there is none).
struct Split {
  std::vector<std::string> before, after;
  bool separated = false;
};
[[nodiscard]] Split split_at_separator(int argc, char** argv);

// Value checks with one wording: a number (decimal, exponent allowed) in [lo, hi], or in (lo, hi] with
// `open_low`; a whole number in [lo, hi].
[[nodiscard]] CLI::Validator number_in(double lo, double hi, bool open_low = false);
[[nodiscard]] CLI::Validator whole_in(uint64_t lo, uint64_t hi);
// A whole number that fits T.
template <class T>
[[nodiscard]] CLI::Validator whole() {
  return whole_in(0, std::numeric_limits<T>::max());
}
// A finite number >= 0.
[[nodiscard]] CLI::Validator non_negative();
// A value that is one of `words`.
[[nodiscard]] CLI::Validator one_of(const std::vector<std::string>& words);
// A non-empty value (a path, a name).
[[nodiscard]] CLI::Validator non_empty();

}  // namespace phub::cli
