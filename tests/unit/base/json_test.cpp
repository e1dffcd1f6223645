// JSON text (phub/base/json.hpp): layout and member order, string escaping, phub's number rule.
#include "phub/base/json.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace phub {
namespace {

// `s` as a lone JSON string, without the newline that ends a document.
std::string json_string(std::string_view s) {
  const std::string text = json_text(Json(std::string(s)));
  return text.substr(0, text.size() - 1);
}

std::string number(double v) {
  const std::string text = json_text(Json(v));
  return text.substr(0, text.size() - 1);
}

TEST(Json, LaysOutObjectsAndArraysTwoSpacesALevelInInsertionOrder) {
  Json doc;
  doc["name"] = "a";
  doc["n"] = 3;
  doc["ok"] = true;
  doc["none"] = nullptr;
  doc["list"] = Json::array({1, "x", Json{{"k", 0.5}}});
  doc["empty"] = Json::object();
  doc["nothing"] = Json::array();
  doc["a"] = 1;  // after "nothing": members are not sorted
  EXPECT_EQ(json_text(doc),
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
            "  \"empty\": {},\n"
            "  \"nothing\": [],\n"
            "  \"a\": 1\n"
            "}\n");
}

TEST(Json, EscapesQuotesBackslashesAndEveryControlCharacter) {
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
  Json doc;
  doc["k\"\n"] = "v";
  EXPECT_EQ(json_text(doc), "{\n  \"k\\\"\\n\": \"v\"\n}\n");  // keys are escaped alike
}

TEST(Json, PassesValidUtf8AndReplacesInvalidBytes) {
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  EXPECT_EQ(json_string("h\xc3\xa9t\xc3\xa9"), "\"h\xc3\xa9t\xc3\xa9\"");  // U+00E9
  EXPECT_EQ(json_string("\xe2\x82\xac"), "\"\xe2\x82\xac\"");              // U+20AC
  EXPECT_EQ(json_string("\xf0\x9f\x98\x80"), "\"\xf0\x9f\x98\x80\"");      // U+1F600
  EXPECT_EQ(json_string("\xf4\x8f\xbf\xbf"), "\"\xf4\x8f\xbf\xbf\"");      // U+10FFFF
  EXPECT_EQ(json_string("\xff"), "\"" + r + "\"");                         // never in UTF-8
  EXPECT_EQ(json_string("a\x80z"), "\"a" + r + "z\"");                     // lone continuation
  EXPECT_EQ(json_string("\xc3"), "\"" + r + "\"");                         // truncated at the end
  EXPECT_EQ(json_string("\xc3z"), "\"" + r + "z\"");                       // truncated before ASCII
  for (const char* bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80"}) {
    // overlong forms, a surrogate, above U+10FFFF: only replacement characters come out, and the text parses
    const std::string q = json_string(bad);
    EXPECT_NE(q.find(r), std::string::npos) << q;
    std::string rest = q.substr(1, q.size() - 2);
    for (size_t at; (at = rest.find(r)) != std::string::npos;) rest.erase(at, r.size());
    EXPECT_EQ(rest, "") << q;
    EXPECT_TRUE(Json::accept(q)) << q;
  }
}

TEST(Json, WritesNumbers) {
  EXPECT_EQ(number(0), "0");
  EXPECT_EQ(number(12), "12");
  EXPECT_EQ(number(-7), "-7");
  EXPECT_EQ(number(102400000), "102400000");  // integral doubles below 1e15 exactly
  EXPECT_EQ(number(0.5), "0.5");
  EXPECT_EQ(number(1234.5678), "1234.57");  // six significant digits otherwise
  EXPECT_EQ(number(1.0 / 3), "0.333333");
  EXPECT_EQ(number(1e-7), "1e-07");
  EXPECT_EQ(number(1e20), "1e+20");
  EXPECT_EQ(number(std::nan("")), "null");
  EXPECT_EQ(number(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(number(-std::numeric_limits<double>::infinity()), "null");

  Json row = Json::array({std::numeric_limits<uint64_t>::max(), std::numeric_limits<int64_t>::min(), uint16_t{65535},
                          -1, false, 2.5});
  EXPECT_EQ(Json::parse(json_text(row)), row);  // integer types exactly
  EXPECT_EQ(json_text(row), "[\n  18446744073709551615,\n  -9223372036854775808,\n  65535,\n  -1,\n  false,\n  2.5\n]\n");
  // Nested doubles follow the same rule.
  EXPECT_EQ(json_text(Json{{"m", Json::array({Json::array({2.0, 1.0 / 3})})}}),
            "{\n  \"m\": [\n    [\n      2,\n      0.333333\n    ]\n  ]\n}\n");
}

}  // namespace
}  // namespace phub
