// Command-line parsing of phub-ctl (CLI11, through lib/cli).
#include "options.hpp"

#include "phub/cli/cli.hpp"
#include "phub/config/config.hpp"
#include "phub/ctl/command.hpp"

namespace phub::ctl_tool {
namespace {

constexpr double kDefaultTimeoutS = 10;
constexpr double kReloadTimeoutS = 30;
constexpr double kCheckpointTimeoutS = 120;  // a round boundary (up to 5 s) and writing a large file

std::unique_ptr<CLI::App> make(Options& o) {
  auto app = cli::make_app("usage: phub-ctl [--socket PATH] [--timeout SECONDS] COMMAND [ARGS]\n",
                           "Sends one command to phub-server's control socket and prints the answer.",
                           ctl::command_help() +
                               "A FILE given to reload is sent as an absolute path.\n"
                               "exit status: 0 done, 1 the server answered with an error, 2 no server to talk to,\n"
                               "             3 no complete answer (timeout, connection lost), 64 bad usage\n");
  app->add_option("--socket", o.socket_path, "the server's control socket (control.socket_path)")
      ->type_name("PATH")
      ->check(cli::non_empty())
      ->capture_default_str();
  app->add_option("--timeout", o.timeout_s,
                  "wait at most this long for the answer (default 10; 30 for reload, 120 for checkpoint)")
      ->type_name("SECONDS")
      ->check(cli::number_in(0, 86400, true));
  // The command and its arguments, as given: options after the command are the command's.
  app->add_option("COMMAND", o.words, "the command and its arguments")->type_name("");
  app->positionals_at_end();
  return app;
}

Options defaults() {
  Options o;
  o.socket_path = config::Control{}.socket_path;
  return o;
}

}  // namespace

std::string usage() { return cli::help_text(make, defaults()); }

double default_timeout_s(const std::vector<std::string>& words) {
  if (!words.empty() && words[0] == "reload") return kReloadTimeoutS;
  if (!words.empty() && words[0] == "checkpoint") return kCheckpointTimeoutS;
  return kDefaultTimeoutS;
}

Expected<Options, std::string> parse_options(int argc, char** argv) {
  return cli::parse_options(make, std::vector<std::string>(argv + 1, argv + argc), defaults());
}

}  // namespace phub::ctl_tool
