// Command-line parsing of phub-ctl.
#include "options.hpp"

#include <cmath>
#include <cstdlib>

#include "phub/config/config.hpp"
#include "phub/ctl/command.hpp"

namespace phub::ctl_tool {
namespace {

constexpr double kDefaultTimeoutS = 10;
constexpr double kReloadTimeoutS = 30;
constexpr double kCheckpointTimeoutS = 120;  // a round boundary (up to 5 s) and writing a large file

Expected<double, std::string> seconds(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 86400) {
    return unexpected("--timeout: '" + text + "' is not a number of seconds in (0, 86400]");
  }
  return v;
}

}  // namespace

std::string usage() {
  return "usage: phub-ctl [--socket PATH] [--timeout SECONDS] COMMAND [ARGS]\n"
         "  --socket PATH      the server's control socket (control.socket_path; default " +
         config::Control{}.socket_path +
         ")\n"
         "  --timeout SECONDS  wait at most this long for the answer (default 10; 30 for reload, 120 for checkpoint)\n" +
         ctl::command_help() +
         "A FILE given to reload is sent as an absolute path.\n"
         "exit status: 0 done, 1 the server answered with an error, 2 no server to talk to,\n"
         "             3 no complete answer (timeout, connection lost), 64 bad usage\n";
}

double default_timeout_s(const std::vector<std::string>& words) {
  if (!words.empty() && words[0] == "reload") return kReloadTimeoutS;
  if (!words.empty() && words[0] == "checkpoint") return kCheckpointTimeoutS;
  return kDefaultTimeoutS;
}

Expected<Options, std::string> parse_options(int argc, char** argv) {
  Options o;
  o.socket_path = config::Control{}.socket_path;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.empty() || a[0] != '-') break;
    const size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    auto value = [&]() -> Expected<std::string, std::string> {
      if (eq != std::string::npos) return a.substr(eq + 1);
      if (i + 1 >= argc) return unexpected(flag + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      o.help = true;
    } else if (flag == "--socket") {
      auto v = value();
      if (!v) return unexpected(v.error());
      if (v->empty()) return unexpected(std::string("--socket: the path is empty"));
      o.socket_path = *v;
    } else if (flag == "--timeout") {
      auto v = value();
      if (!v) return unexpected(v.error());
      auto s = seconds(*v);
      if (!s) return unexpected(s.error());
      o.timeout_s = *s;
    } else {
      return unexpected("unknown option '" + a + "'");
    }
  }
  for (; i < argc; ++i) o.words.emplace_back(argv[i]);
  return o;
}

}  // namespace phub::ctl_tool
