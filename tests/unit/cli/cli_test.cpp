// lib/cli: phub's style of CLI11 applications, as the four tools use it.
#include "phub/cli/cli.hpp"

#include <gtest/gtest.h>

namespace phub::cli {
namespace {

struct Tool {
  std::string path = "/default";
  double seconds = 0;
  uint16_t port = 0;
  bool check = false;
  std::vector<std::string> words;
  std::unique_ptr<CLI::App> app = make_app("usage: tool [--path P] COMMAND\n", "Does a thing.", "footer line\n");
  Tool() {
    app->add_option("--path", path, "a path")->type_name("P")->check(non_empty())->capture_default_str();
    app->add_option("--seconds", seconds, "how long")->check(number_in(0, 10, true));
    app->add_option("--port", port, "a port")->check(whole<uint16_t>());
    app->add_flag("--check", check, "check only");
    app->add_option("--mode", path, "a mode")->check(one_of({"open", "closed"}));
    app->add_option("COMMAND", words, "the command");
    app->positionals_at_end();
  }
  Expected<Parsed, std::string> operator()(std::vector<std::string> args) { return parse(*app, std::move(args)); }
};

TEST(Cli, HelpStartsWithTheUsageLinesThenDescriptionOptionsAndFooter) {
  Tool t;
  auto r = t({"--path", "x", "--help"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(r->help);
  const std::string& h = r->help_text;
  EXPECT_EQ(h.rfind("usage: tool [--path P] COMMAND\n\nDoes a thing.\n", 0), 0u) << h;
  EXPECT_NE(h.find("-h,--help"), std::string::npos);
  EXPECT_NE(h.find("--path P=/default"), std::string::npos) << h;  // defaults shown
  EXPECT_NE(h.find("footer line"), std::string::npos);
  EXPECT_TRUE(Tool()({"-h"})->help);
}

TEST(Cli, ParsesValuesFlagsAndEverythingAfterTheCommand) {
  Tool t;
  auto r = t({"--path=/a", "--seconds", "2.5", "--port", "65535", "--check", "stats", "--json", "--path", "b"});
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->help);
  EXPECT_EQ(t.path, "/a");
  EXPECT_EQ(t.seconds, 2.5);
  EXPECT_EQ(t.port, 65535);
  EXPECT_TRUE(t.check);
  EXPECT_EQ(t.words, (std::vector<std::string>{"stats", "--json", "--path", "b"}));
  Tool last;
  ASSERT_TRUE(last({"--path", "a", "--path", "b"}));
  EXPECT_EQ(last.path, "b");  // a repeated option keeps its last value
}

TEST(Cli, MistakesNameTheOptionOrArgument) {
  EXPECT_EQ(Tool()({"--sock", "x"}).error(), "unknown option '--sock'");
  EXPECT_EQ(Tool()({"--seconds", "soon"}).error(), "--seconds: 'soon' is not a number in (0, 10]");
  EXPECT_EQ(Tool()({"--seconds", "0"}).error(), "--seconds: '0' is not a number in (0, 10]");
  EXPECT_EQ(Tool()({"--seconds", "nan"}).error(), "--seconds: 'nan' is not a number in (0, 10]");
  EXPECT_EQ(Tool()({"--port", "65536"}).error(), "--port: '65536' is not a whole number in 0..65535");
  EXPECT_EQ(Tool()({"--port", "-1"}).error(), "--port: '-1' is not a whole number in 0..65535");
  EXPECT_EQ(Tool()({"--port", "1.5"}).error(), "--port: '1.5' is not a whole number in 0..65535");
  EXPECT_EQ(Tool()({"--mode", "ajar"}).error(), "--mode: 'ajar' is not open|closed");
  const auto missing = Tool()({"--path"});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().rfind("--path", 0), 0u) << missing.error();
  EXPECT_EQ(Tool()({"--path", ""}).error(), "--path: the value is empty");
}

TEST(Cli, NonNegativeNumbers) {
  double v = -1;
  auto app = make_app("usage: x\n", "");
  app->add_option("--rate", v)->check(non_negative());
  ASSERT_TRUE(parse(*app, {"--rate", "1e6"}));
  EXPECT_EQ(v, 1e6);
  EXPECT_EQ(parse(*app, {"--rate", "-2"}).error(), "--rate: '-2' is not a non-negative number");
  EXPECT_EQ(parse(*app, {"--rate", "x"}).error(), "--rate: 'x' is not a non-negative number");
}

TEST(Cli, SplitsAtTheFirstSeparator) {
  const char* argv[] = {"tool", "-l", "0-1", "--", "--json", "--", "x"};
  const Split s = split_at_separator(7, const_cast<char**>(argv));
  EXPECT_TRUE(s.separated);
  EXPECT_EQ(s.before, (std::vector<std::string>{"-l", "0-1"}));
  EXPECT_EQ(s.after, (std::vector<std::string>{"--json", "--", "x"}));
  const char* plain[] = {"tool", "--json"};
  const Split p = split_at_separator(2, const_cast<char**>(plain));
  EXPECT_FALSE(p.separated);
  EXPECT_EQ(p.before, (std::vector<std::string>{"--json"}));
  EXPECT_TRUE(p.after.empty());
}

TEST(Cli, SubcommandsHaveTheirOwnHelp) {
  auto app = make_app("usage: probe COMMAND\n", "Probes.");
  std::string listen;
  CLI::App* agent = subcommand(*app, "agent", "usage: probe agent --listen A\n", "Answers.");
  agent->add_option("--listen", listen)->required();
  auto h = parse(*app, {"agent", "--help"});
  ASSERT_TRUE(h) << h.error();
  EXPECT_EQ(h->help_text.rfind("usage: probe agent --listen A\n", 0), 0u) << h->help_text;
  EXPECT_EQ(parse(*app, {"agent", "--listen", "a", "--lisen", "x"}).error(), "unknown option '--lisen'");
  EXPECT_EQ(parse(*app, {"agent"}).error(), "--listen is required");
  ASSERT_TRUE(parse(*app, {"agent", "--listen", "a:1"}));
  EXPECT_EQ(listen, "a:1");
}

}  // namespace
}  // namespace phub::cli
