// The control commands: checking a request's words against the command table, and calling the Handler.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "phub/base/expected.hpp"
#include "phub/ctl/handler.hpp"

namespace phub::ctl {

enum class Verb { help, status, stats, jobs, job, config, version, reload, drain, reset, checkpoint };

// A request whose words were checked: the command, and its argument (NAME or FILE) if it has one.
struct Command {
  Verb verb = Verb::help;
  StatsFormat stats_format = StatsFormat::text;
  std::optional<std::string> argument;
  bool show_secrets = false;  // config --show-secrets

  bool operator==(const Command&) const = default;
};

// "status, stats [--json], jobs, job NAME, config [--show-secrets], version, reload [FILE], drain NAME, reset NAME, checkpoint NAME, help"
[[nodiscard]] std::string command_list();
// One line per command with what it does (the answer to `help`, and part of phub-ctl's usage).
[[nodiscard]] std::string command_help();

// Checks the words of a request: a known command, the arguments it takes (a NAME not empty, a FILE
// an absolute path, only `--json` after `stats`). The error says what is wrong and shows the usage.
[[nodiscard]] Expected<Command, std::string> parse_command(std::span<const std::string> words);

// Calls the Handler's method for a command (`help` is answered here). An exception becomes an error
// reply, and so does a body longer than the protocol allows.
[[nodiscard]] Reply dispatch(const Command& command, Handler& handler);

// A whole request line (without its newline) to its reply: split into words, parse, dispatch. Every
// mistake in the request is an error reply that says what is wrong.
[[nodiscard]] Reply answer_request(std::string_view line, Handler& handler);

}  // namespace phub::ctl
