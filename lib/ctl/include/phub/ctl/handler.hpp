// The interface the server implements to answer control commands, and the reply it returns.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace phub::ctl {

// A command's answer: success or failure, and a body (text ending in a newline, or JSON) for phub-ctl
// to print on stdout (success) or stderr (failure).
struct Reply {
  bool ok = true;
  std::string body;

  [[nodiscard]] static Reply success(std::string body) { return Reply{true, std::move(body)}; }
  [[nodiscard]] static Reply failure(std::string body) { return Reply{false, std::move(body)}; }
  bool operator==(const Reply&) const = default;
};

enum class StatsFormat { text, json };

// One method per command. The control socket has checked the command's arguments before it calls
// one; the server checks their meaning (does the job exist, does the file load). Every method runs
// on the thread that calls ControlServer::poll_once and holds up every other client while it runs,
// so a long operation (a reload that validates a config) should be bounded in time. An exception a
// method throws is answered as an error reply; it never reaches the caller of poll_once.
class Handler {
 public:
  virtual ~Handler() = default;

  virtual Reply status() = 0;                     // one screen: ready or not, uptime, jobs, rates
  virtual Reply stats(StatsFormat format) = 0;    // every counter, as text or one JSON document
  virtual Reply jobs() = 0;                       // one line per job
  virtual Reply job(std::string_view name) = 0;   // one job in detail
  virtual Reply config(bool show_secrets) = 0;    // the running config as Lua, secrets redacted unless shown
  virtual Reply version() = 0;                    // the server's version
  // Reloads the config from `file` (an absolute path), or from the file the server started with.
  virtual Reply reload(std::optional<std::string_view> file) = 0;
  virtual Reply drain(std::string_view name) = 0;  // stop admitting new rounds of a job
  virtual Reply reset(std::string_view name) = 0;  // reset a job's rounds
  // Write a ps job's checkpoint now; answers with the file and round, or why not. Waits for the job's
  // next round boundary (bounded).
  virtual Reply checkpoint(std::string_view name) = 0;
};

}  // namespace phub::ctl
