// phub-ctl: sends one command to phub-server's control socket and prints the answer.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "options.hpp"
#include "phub/ctl/client.hpp"
#include "phub/ctl/protocol.hpp"

namespace {

constexpr int kExitErrorAnswer = 1;
constexpr int kExitNoServer = 2;
constexpr int kExitNoAnswer = 3;
constexpr int kExitUsage = 64;  // EX_USAGE

int fail(int status, const std::string& what) {
  std::fprintf(stderr, "phub-ctl: %s\n", what.c_str());
  return status;
}

// reload's FILE goes to a server that does not share our working directory.
bool make_reload_path_absolute(std::vector<std::string>& words, std::string& error) {
  if (words.size() != 2 || words[0] != "reload") return true;
  std::error_code ec;
  const auto absolute = std::filesystem::absolute(words[1], ec);
  if (ec) {
    error = "reload: " + words[1] + ": " + ec.message();
    return false;
  }
  words[1] = absolute.lexically_normal().string();
  return true;
}

int connect_failure(const std::string& path, const phub::ctl::CallError& e) {
  if (e.errno_value == EACCES || e.errno_value == EPERM) {
    return fail(kExitNoServer, "cannot connect to " + path + " (" + e.message +
                                   "): the socket is mode 0600, run phub-ctl as the user phub-server runs as");
  }
  if (e.errno_value == 0) return fail(kExitNoServer, e.message);
  return fail(kExitNoServer, "no phub-server listening on " + path + " (" + e.message + ")");
}

std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

void print(std::FILE* to, const std::string& body) {
  std::fwrite(body.data(), 1, body.size(), to);
  if (!body.empty() && body.back() != '\n') std::fputc('\n', to);
  std::fflush(to);
}

}  // namespace

int main(int argc, char** argv) {
  using phub::ctl_tool::usage;
  auto opts = phub::ctl_tool::parse_options(argc, argv);
  if (!opts) return fail(kExitUsage, opts.error() + " (see --help)");
  if (opts->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  if (opts->words.empty()) {
    std::fputs(usage().c_str(), stderr);
    return kExitUsage;
  }
  std::string error;
  if (!make_reload_path_absolute(opts->words, error)) return fail(kExitUsage, error);
  for (const auto& w : opts->words) {
    if (phub::ctl::has_control_bytes(w)) {
      return fail(kExitUsage, "argument " + phub::ctl::excerpt(w) + " holds a control character and cannot be sent");
    }
  }
  const std::string request = phub::ctl::format_request(opts->words);
  if (request.size() > phub::ctl::kMaxRequestBytes) {
    return fail(kExitUsage, "the request is " + std::to_string(request.size()) + " bytes, more than the " +
                                std::to_string(phub::ctl::kMaxRequestBytes) + " the server reads");
  }

  const double timeout_s = opts->timeout_s > 0 ? opts->timeout_s : phub::ctl_tool::default_timeout_s(opts->words);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto answer = phub::ctl::call(opts->socket_path, request, timeout);
  if (!answer) {
    const auto& e = answer.error();
    switch (e.kind) {
      case phub::ctl::CallError::Kind::connect: return connect_failure(opts->socket_path, e);
      case phub::ctl::CallError::Kind::timeout:
        return fail(kExitNoAnswer, "no answer from " + opts->socket_path + " within " + seconds_text(timeout_s) +
                                       " (--timeout)");
      case phub::ctl::CallError::Kind::broken: return fail(kExitNoAnswer, opts->socket_path + ": " + e.message);
    }
  }
  print(answer->ok ? stdout : stderr, answer->body);
  return answer->ok ? 0 : kExitErrorAnswer;
}
