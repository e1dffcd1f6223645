// The JSON writer (phub/base/json_writer.hpp): layout, RFC 8259 string escaping, number forms.
#include "phub/base/json_writer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace phub {
namespace {

// `s` written as a lone JSON string (no container: no layout around it).
std::string json_string(std::string_view s) {
  JsonWriter w;
  w.value({}, s);
  return w.str();
}

std::string number(double v) {
  JsonWriter w;
  w.value({}, v);
  return w.str();
}

TEST(JsonWriter, LaysOutObjectsAndArraysTwoSpacesALevel) {
  JsonWriter w;
  w.begin_object().value("name", "a").value("n", 3).value("ok", true).null("none");
  w.begin_array("list").item(1).item("x").begin_object().value("k", 0.5).end_object().end_array();
  w.begin_array("row", true).item(1).item(2.5).null().end_array();
  w.begin_object("empty").end_object().begin_array("nothing").end_array();
  w.end_object();
  EXPECT_EQ(w.str(),
            "{\n"
            "  \"name\": \"a\",\n"
            "  \"n\": 3,\n"
            "  \"ok\": true,\n"
            "  \"none\": null,\n"
            "  \"list\": [\n"
            "    1,\n"
            "    \"x\",\n"
            "    {\n"
            "      \"k\": 0.5\n"
            "    }\n"
            "  ],\n"
            "  \"row\": [1, 2.5, null],\n"
            "  \"empty\": {},\n"
            "  \"nothing\": []\n"
            "}\n");
}

TEST(JsonWriter, ArraysIgnoreKeysAndObjectsKeepEmptyKeys) {
  JsonWriter w;
  w.begin_array().value("ignored", 1).begin_object("ignored too").value("", "empty key").end_object().end_array();
  EXPECT_EQ(w.str(), "[\n  1,\n  {\n    \"\": \"empty key\"\n  }\n]\n");
}

TEST(JsonWriter, EscapesQuotesBackslashesAndEveryControlCharacter) {
  EXPECT_EQ(json_string("plain"), "\"plain\"");
  EXPECT_EQ(json_string(""), "\"\"");
  EXPECT_EQ(json_string("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(json_string("C:\\dir"), "\"C:\\\\dir\"");
  EXPECT_EQ(json_string("/"), "\"/\"");  // solidus may stay as it is
  EXPECT_EQ(json_string("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(json_string(std::string_view("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(json_string("\x01\x1f"), "\"\\u0001\\u001f\"");
  EXPECT_EQ(json_string("\x7f"), "\"\x7f\"");  // DEL is not a control character for JSON
  for (int c = 0; c < 0x20; ++c) {
    const std::string q = json_string(std::string(1, static_cast<char>(c)));
    EXPECT_EQ(q.front(), '"');
    EXPECT_EQ(q[1], '\\') << c;
    for (char k : q) EXPECT_GE(static_cast<unsigned char>(k), 0x20) << c;
  }
  JsonWriter w;
  w.begin_object().value("k\"\n", "v").end_object();
  EXPECT_EQ(w.str(), "{\n  \"k\\\"\\n\": \"v\"\n}\n");  // keys are escaped alike
}

TEST(JsonWriter, PassesValidUtf8AndReplacesInvalidBytes) {
  EXPECT_EQ(json_string("h\xc3\xa9t\xc3\xa9"), "\"h\xc3\xa9t\xc3\xa9\"");           // U+00E9
  EXPECT_EQ(json_string("\xe2\x82\xac"), "\"\xe2\x82\xac\"");                       // U+20AC
  EXPECT_EQ(json_string("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");               // U+1F600
  EXPECT_EQ(json_string("\xef\xbf\xbf"), "\"\xef\xbf\xbf\"");                       // U+FFFF
  EXPECT_EQ(json_string("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");               // U+10FFFF
  EXPECT_EQ(json_string("\xff"), "\"\\ufffd\"");                                    // never in UTF-8
  EXPECT_EQ(json_string("a\x80z"), "\"a\\ufffdz\"");                                // lone continuation
  EXPECT_EQ(json_string("\xc3"), "\"\\ufffd\"");                                    // truncated at the end
  EXPECT_EQ(json_string("\xc3z"), "\"\\ufffdz\"");                                  // truncated before ASCII
  EXPECT_EQ(json_string("\xc0\xaf"), "\"\\ufffd\\ufffd\"");                         // overlong '/'
  EXPECT_EQ(json_string("\xe0\x80\xaf"), "\"\\ufffd\\ufffd\\ufffd\"");              // overlong, 3 bytes
  EXPECT_EQ(json_string("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");              // surrogate U+D800
  EXPECT_EQ(json_string("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
  EXPECT_EQ(json_string("\xf5\x80\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

TEST(JsonWriter, WritesNumbers) {
  EXPECT_EQ(number(0), "0");
  EXPECT_EQ(number(12), "12");
  EXPECT_EQ(number(-7), "-7");
  EXPECT_EQ(number(102400000), "102400000");  // integral doubles below 1e15 exactly
  EXPECT_EQ(number(0.5), "0.5");
  EXPECT_EQ(number(1234.5678), "1234.57");  // six significant digits otherwise
  EXPECT_EQ(number(1e-7), "1e-07");
  EXPECT_EQ(number(1e20), "1e+20");
  EXPECT_EQ(number(std::nan("")), "null");
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(-std::numeric_limits<double>::infinity()), "null");

  JsonWriter w;
  w.begin_array({}, true).item(std::numeric_limits<uint64_t>::max()).item(std::numeric_limits<int64_t>::min());
  w.item(uint16_t{65535}).item(-1).item(false).end_array();
  EXPECT_EQ(w.str(), "[18446744073709551615, -9223372036854775808, 65535, -1, false]\n");
}

}  // namespace
}  // namespace phub
