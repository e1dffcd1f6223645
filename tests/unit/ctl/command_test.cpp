// Commands: every command and its arguments, the error for each kind of mistake, the calls made.
#include "phub/ctl/command.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fake_handler.hpp"
#include "phub/ctl/protocol.hpp"

namespace phub::ctl {
namespace {

using test::FakeHandler;

const std::string kList =
    "commands: status, stats [--json], jobs, job NAME, config [--show-secrets], version, reload [FILE], drain NAME, reset NAME, checkpoint NAME, help";

std::string error_of(std::string_view line) {
  FakeHandler h;
  const Reply r = answer_request(line, h);
  EXPECT_FALSE(r.ok) << line;
  EXPECT_TRUE(h.calls().empty()) << line << ": a refused request reached the handler";
  return r.body;
}

TEST(Commands, EachReachesItsMethodWithItsArgument) {
  FakeHandler h;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"status", "status"},
      {"stats", "stats"},
      {"stats --json", "stats --json"},
      {"jobs", "jobs"},
      {"job alpha", "job alpha"},
      {"job \"with space\"", "job with space"},
      {"config", "config"},
      {"config --show-secrets", "config --show-secrets"},
      {"version", "version"},
      {"reload", "reload"},
      {"reload '/etc/phub/new config.lua'", "reload /etc/phub/new config.lua"},
      {"drain alpha", "drain alpha"},
      {"reset alpha", "reset alpha"},
      {"checkpoint alpha", "checkpoint alpha"},
  };
  for (const auto& [line, call] : cases) {
    const Reply r = answer_request(line, h);
    EXPECT_TRUE(r.ok) << line << ": " << r.body;
    ASSERT_FALSE(h.calls().empty());
    EXPECT_EQ(h.calls().back(), call);
  }
  EXPECT_EQ(h.calls().size(), cases.size());
}

TEST(Commands, AnswersAreTheHandlersRepliesAndExceptionsErrors) {
  FakeHandler h;
  EXPECT_EQ(answer_request("stats --json", h), Reply::success("{\"pushes\": 12}\n"));
  EXPECT_EQ(answer_request("job nosuch", h), Reply::failure("no job named 'nosuch'\n"));
  EXPECT_EQ(answer_request("reset throw", h), Reply::failure("internal error: the engine said no\n"));
  EXPECT_EQ(answer_request("reset alpha", h), Reply::success("reset alpha\n"));
  EXPECT_EQ(answer_request("checkpoint alpha", h), Reply::success("checkpoint of round 7 written\n"));
  EXPECT_EQ(answer_request("checkpoint beta", h), Reply::failure("not a ps job\n"));
}

TEST(Commands, HelpIsAnsweredWithoutTheHandler) {
  FakeHandler h;
  const Reply r = answer_request("help", h);
  EXPECT_TRUE(r.ok);
  EXPECT_NE(r.body.find("  reload [FILE]   load, check and apply a config"), std::string::npos) << r.body;
  EXPECT_TRUE(h.calls().empty());
}

TEST(Commands, EmptyAndUnknownListTheCommands) {
  EXPECT_EQ(error_of(""), "empty request; " + kList + "\n");
  EXPECT_EQ(error_of("   "), "empty request; " + kList + "\n");
  EXPECT_EQ(error_of("foo"), "unknown command 'foo'; " + kList + "\n");
  EXPECT_EQ(error_of("STATUS"), "unknown command 'STATUS'; " + kList + "\n");
  EXPECT_EQ(error_of("--json stats"), "unknown command '--json'; " + kList + "\n");
}

TEST(Commands, ArgumentMistakesShowTheUsage) {
  EXPECT_EQ(error_of("job"), "job: missing NAME (usage: job NAME)\n");
  EXPECT_EQ(error_of("drain"), "drain: missing NAME (usage: drain NAME)\n");
  EXPECT_EQ(error_of("reset ''"), "reset: NAME is empty (usage: reset NAME)\n");
  EXPECT_EQ(error_of("checkpoint"), "checkpoint: missing NAME (usage: checkpoint NAME)\n");
  EXPECT_EQ(error_of("job a b"), "job: unexpected argument 'b' (usage: job NAME)\n");
  EXPECT_EQ(error_of("status now"), "status: unexpected argument 'now' (usage: status)\n");
  EXPECT_EQ(error_of("version --json"), "version: unexpected argument '--json' (usage: version)\n");
  EXPECT_EQ(error_of("stats --xml"), "stats: unknown option '--xml' (usage: stats [--json])\n");
  EXPECT_EQ(error_of("config --json"), "config: unknown option '--json' (usage: config [--show-secrets])\n");
  EXPECT_EQ(error_of("stats --json --json"), "stats: unexpected argument '--json' (usage: stats [--json])\n");
  EXPECT_EQ(error_of("reload a.lua"),
            "reload: FILE must be an absolute path, not 'a.lua' (the server does not share the client's working "
            "directory) (usage: reload [FILE])\n");
  EXPECT_EQ(error_of("reload /a /b"), "reload: unexpected argument '/b' (usage: reload [FILE])\n");
}

TEST(Commands, MalformedLinesSayWhatIsWrong) {
  EXPECT_EQ(error_of("job \"alpha"), "unterminated \" quote opened at byte 5\n");
  EXPECT_EQ(error_of(std::string("status\0", 7)), "control byte 0x00 at byte 7 (a request is one line of text)\n");
  EXPECT_EQ(error_of(std::string(3000, 'x')).substr(0, 20), "unknown command 'xxx");
  EXPECT_LT(error_of(std::string(3000, 'x')).size(), 300u);  // the echo of a long word is cut
}

TEST(Commands, AnAnswerAboveTheLimitIsAnError) {
  FakeHandler h;
  h.config_bytes = kMaxBodyBytes;
  EXPECT_TRUE(answer_request("config", h).ok);
  h.config_bytes = kMaxBodyBytes + 1;
  EXPECT_EQ(answer_request("config", h),
            Reply::failure("the answer is 67108865 bytes, above the limit of 67108864 bytes an answer may have\n"));
}

TEST(ParseCommand, GivesVerbFormatAndArgument) {
  const std::vector<std::string> stats = {"stats", "--json"};
  auto c = parse_command(stats);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, (Command{Verb::stats, StatsFormat::json, std::nullopt}));
  const std::vector<std::string> reload = {"reload", "/x"};
  auto r = parse_command(reload);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, (Command{Verb::reload, StatsFormat::text, std::string("/x")}));
}

}  // namespace
}  // namespace phub::ctl
