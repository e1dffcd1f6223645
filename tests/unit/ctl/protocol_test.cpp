// The wire format: splitting and quoting request words, answer framing, status lines.
#include "phub/ctl/protocol.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace phub::ctl {
namespace {

using Words = std::vector<std::string>;

Words split_ok(std::string_view line) {
  auto words = split_words(line);
  EXPECT_TRUE(words.has_value()) << (words ? "" : words.error());
  return words ? *words : Words{};
}

std::string split_error(std::string_view line) {
  auto words = split_words(line);
  EXPECT_FALSE(words.has_value()) << "split " << line;
  return words ? "" : words.error();
}

TEST(SplitWords, SpacesAndTabsSeparateWords) {
  EXPECT_EQ(split_ok("stats --json"), (Words{"stats", "--json"}));
  EXPECT_EQ(split_ok("  job \t alpha  "), (Words{"job", "alpha"}));
  EXPECT_EQ(split_ok(""), Words{});
  EXPECT_EQ(split_ok(" \t "), Words{});
}

TEST(SplitWords, QuotesKeepSpaces) {
  EXPECT_EQ(split_ok("reload \"/etc/phub/my config.lua\""), (Words{"reload", "/etc/phub/my config.lua"}));
  EXPECT_EQ(split_ok("reload '/a b/c'"), (Words{"reload", "/a b/c"}));
  EXPECT_EQ(split_ok("job /a/\"b c\"/d"), (Words{"job", "/a/b c/d"}));  // parts of one word join
  EXPECT_EQ(split_ok("job \"\""), (Words{"job", ""}));
}

TEST(SplitWords, DoubleQuotesTakeTwoEscapesSingleQuotesNone) {
  EXPECT_EQ(split_ok(R"(x "a\"b\\c\d")"), (Words{"x", R"(a"b\c\d)"}));
  EXPECT_EQ(split_ok(R"(x 'a\"b')"), (Words{"x", R"(a\"b)"}));
  EXPECT_EQ(split_ok(R"(x a\b)"), (Words{"x", R"(a\b)"}));  // outside quotes a backslash is a byte
  EXPECT_EQ(split_ok("x \"it's\""), (Words{"x", "it's"}));
}

TEST(SplitWords, UnterminatedQuoteNamesWhereItOpened) {
  EXPECT_EQ(split_error("reload \"/a b"), "unterminated \" quote opened at byte 8");
  EXPECT_EQ(split_error("job 'x"), "unterminated ' quote opened at byte 5");
  EXPECT_EQ(split_error(R"(job "x\")"), "unterminated \" quote opened at byte 5");
}

TEST(SplitWords, ControlBytesAreRefusedWithTheirPosition) {
  EXPECT_EQ(split_error(std::string("job a\0b", 7)), "control byte 0x00 at byte 6 (a request is one line of text)");
  EXPECT_EQ(split_error("status\r"), "control byte 0x0d at byte 7 (a request is one line of text)");
  EXPECT_EQ(split_error("\x7fstatus"), "control byte 0x7f at byte 1 (a request is one line of text)");
  EXPECT_EQ(split_error("'\x1b[2J'"), "control byte 0x1b at byte 2 (a request is one line of text)");
}

TEST(SplitWords, Utf8IsText) {
  EXPECT_EQ(split_ok("reload \"/srv/conf/ä ö.lua\""), (Words{"reload", "/srv/conf/ä ö.lua"}));
}

TEST(QuoteWord, RoundTripsThroughSplitWords) {
  const Words tricky = {"plain", "", "a b", "tab\there", "\"", "'", "\\", "a\\\"b", "it's \"x\"", "/p/ä", "--json"};
  for (const auto& w : tricky) {
    EXPECT_EQ(split_ok("cmd " + quote_word(w)), (Words{"cmd", w})) << quote_word(w);
  }
  EXPECT_EQ(quote_word("alpha"), "alpha");
  EXPECT_EQ(quote_word("a b"), "\"a b\"");
}

TEST(FormatRequest, OneLineEndingInNewline) {
  const Words words = {"reload", "/my dir/x.lua"};
  EXPECT_EQ(format_request(words), "reload \"/my dir/x.lua\"\n");
}

TEST(HasControlBytes, TabIsText) {
  EXPECT_FALSE(has_control_bytes("a\tb ä"));
  EXPECT_TRUE(has_control_bytes("a\nb"));
}

TEST(Answer, FramedByStatusLineAndLength) {
  EXPECT_EQ(format_answer(Reply::success("ready\n")), "ok 6\nready\n");
  EXPECT_EQ(format_answer(Reply::failure("no\n")), "error 3\nno\n");
  EXPECT_EQ(format_answer(Reply::success("")), "ok 0\n");
}

TEST(StatusLine, ParsesOkAndError) {
  auto ok = parse_status_line("ok 6");
  ASSERT_TRUE(ok.has_value());
  EXPECT_TRUE(ok->ok);
  EXPECT_EQ(ok->body_bytes, 6u);
  auto err = parse_status_line("error 0");
  ASSERT_TRUE(err.has_value());
  EXPECT_FALSE(err->ok);
  EXPECT_EQ(err->body_bytes, 0u);
  auto most = parse_status_line("ok " + std::to_string(kMaxBodyBytes));
  ASSERT_TRUE(most.has_value());
  EXPECT_EQ(most->body_bytes, kMaxBodyBytes);
}

TEST(StatusLine, RefusesAnythingElse) {
  for (const char* bad : {"", "ok", "ok ", "OK 1", "ok 01", "ok -1", "ok 1 ", "ok  1", "fine 3", "ok 1x", "error 1e3",
                          "ok 99999999999999999999999", "ok 67108865"}) {
    EXPECT_FALSE(parse_status_line(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_EQ(parse_status_line("ok 67108865").error(),
            "not an answer's status line (the length is above the limit of 67108864): 'ok 67108865'");
}

TEST(Excerpt, EscapesAndCuts) {
  EXPECT_EQ(excerpt("foo"), "'foo'");
  EXPECT_EQ(excerpt("a\x01\\b"), "'a\\x01\\x5cb'");
  EXPECT_EQ(excerpt(std::string(100, 'x'), 4), "'xxxx'...");
}

}  // namespace
}  // namespace phub::ctl
