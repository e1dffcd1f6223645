// The control commands: the command table, argument checks and the call to the Handler.
#include "phub/ctl/command.hpp"

#include <exception>

#include "phub/ctl/protocol.hpp"

namespace phub::ctl {
namespace {

// What may follow a command's name.
enum class Takes { nothing, json_flag, secrets_flag, name, optional_file };

struct CommandSpec {
  std::string_view name;
  Verb verb;
  Takes takes;
  std::string_view summary;
};

constexpr CommandSpec kCommands[] = {
    {"status", Verb::status, Takes::nothing, "the server's state at a glance"},
    {"stats", Verb::stats, Takes::json_flag, "every counter, as text or as one JSON document"},
    {"jobs", Verb::jobs, Takes::nothing, "one line per job"},
    {"job", Verb::job, Takes::name, "one job in detail"},
    {"config", Verb::config, Takes::secrets_flag, "the running config as Lua (secrets redacted unless --show-secrets)"},
    {"version", Verb::version, Takes::nothing, "the server's version"},
    {"reload", Verb::reload, Takes::optional_file, "load, check and apply a config (default: the server's file)"},
    {"drain", Verb::drain, Takes::name, "drain a job"},
    {"reset", Verb::reset, Takes::name, "reset a job's rounds"},
    {"checkpoint", Verb::checkpoint, Takes::name, "write a ps job's checkpoint now"},
    {"help", Verb::help, Takes::nothing, "this list"},
};

std::string usage_of(const CommandSpec& c) {
  switch (c.takes) {
    case Takes::nothing: return std::string(c.name);
    case Takes::json_flag: return std::string(c.name) + " [--json]";
    case Takes::secrets_flag: return std::string(c.name) + " [--show-secrets]";
    case Takes::name: return std::string(c.name) + " NAME";
    case Takes::optional_file: return std::string(c.name) + " [FILE]";
  }
  return std::string(c.name);
}

Unexpected<std::string> refuse(const CommandSpec& c, const std::string& why) {
  return unexpected(std::string(c.name) + ": " + why + " (usage: " + usage_of(c) + ")");
}

Expected<Command, std::string> check_arguments(const CommandSpec& c, std::span<const std::string> args) {
  Command cmd;
  cmd.verb = c.verb;
  const size_t most = c.takes == Takes::nothing ? 0 : 1;
  if (args.size() > most) return refuse(c, "unexpected argument " + excerpt(args[most]));
  if (args.empty()) {
    if (c.takes == Takes::name) return refuse(c, "missing NAME");
    return cmd;
  }
  const std::string& arg = args[0];
  switch (c.takes) {
    case Takes::nothing:
      break;
    case Takes::json_flag:
      if (arg != "--json") return refuse(c, "unknown option " + excerpt(arg));
      cmd.stats_format = StatsFormat::json;
      break;
    case Takes::secrets_flag:
      if (arg != "--show-secrets") return refuse(c, "unknown option " + excerpt(arg));
      cmd.show_secrets = true;
      break;
    case Takes::name:
      if (arg.empty()) return refuse(c, "NAME is empty");
      cmd.argument = arg;
      break;
    case Takes::optional_file:
      if (arg.empty() || arg[0] != '/') {
        return refuse(c, "FILE must be an absolute path, not " + excerpt(arg) +
                             " (the server does not share the client's working directory)");
      }
      cmd.argument = arg;
      break;
  }
  return cmd;
}

Reply call_handler(const Command& cmd, Handler& h) {
  const std::string_view arg = cmd.argument ? std::string_view(*cmd.argument) : std::string_view();
  switch (cmd.verb) {
    case Verb::help: return Reply::success(command_help());
    case Verb::status: return h.status();
    case Verb::stats: return h.stats(cmd.stats_format);
    case Verb::jobs: return h.jobs();
    case Verb::job: return h.job(arg);
    case Verb::config: return h.config(cmd.show_secrets);
    case Verb::version: return h.version();
    case Verb::reload: return h.reload(cmd.argument ? std::optional<std::string_view>(arg) : std::nullopt);
    case Verb::drain: return h.drain(arg);
    case Verb::reset: return h.reset(arg);
    case Verb::checkpoint: return h.checkpoint(arg);
  }
  return Reply::failure("internal error: command without a handler\n");
}

}  // namespace

std::string command_list() {
  std::string out;
  for (const auto& c : kCommands) out += (out.empty() ? "" : ", ") + usage_of(c);
  return out;
}

std::string command_help() {
  std::string out = "commands:\n";
  for (const auto& c : kCommands) {
    std::string usage = usage_of(c);
    usage.resize(16, ' ');
    out += "  " + usage + std::string(c.summary) + "\n";
  }
  return out;
}

Expected<Command, std::string> parse_command(std::span<const std::string> words) {
  if (words.empty()) return unexpected("empty request; commands: " + command_list());
  for (const auto& c : kCommands) {
    if (words[0] == c.name) return check_arguments(c, words.subspan(1));
  }
  return unexpected("unknown command " + excerpt(words[0]) + "; commands: " + command_list());
}

Reply dispatch(const Command& command, Handler& handler) {
  Reply reply;
  try {
    reply = call_handler(command, handler);
  } catch (const std::exception& e) {
    return Reply::failure(std::string("internal error: ") + e.what() + "\n");
  } catch (...) {
    return Reply::failure("internal error: an exception that is not a std::exception\n");
  }
  if (reply.body.size() > kMaxBodyBytes) {
    return Reply::failure("the answer is " + std::to_string(reply.body.size()) + " bytes, above the limit of " +
                          std::to_string(kMaxBodyBytes) + " bytes an answer may have\n");
  }
  return reply;
}

Reply answer_request(std::string_view line, Handler& handler) {
  auto words = split_words(line);
  if (!words) return Reply::failure(words.error() + "\n");
  auto command = parse_command(*words);
  if (!command) return Reply::failure(command.error() + "\n");
  return dispatch(*command, handler);
}

}  // namespace phub::ctl
