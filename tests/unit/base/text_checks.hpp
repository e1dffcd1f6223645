// Checks of a text form: values survive format then parse; malformed texts are refused with the text quoted
// and the fault named.
#pragma once

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <string_view>

namespace phub::test {

// parse(format(v)) == v for each value.
template <class Parse, class Format, class Value>
void expect_round_trips(Parse parse, Format format, std::initializer_list<Value> values) {
  for (const Value& v : values) {
    auto back = parse(format(v));
    ASSERT_TRUE(back) << format(v);
    EXPECT_EQ(*back, v) << format(v);
  }
}

struct Refusal {
  std::string_view text;
  std::string_view fault;
};

// parse(text) fails with exactly "\"<text>\" <lead>: <fault>" for each case.
template <class Parse>
void expect_refusals(Parse parse, std::string_view lead, std::initializer_list<Refusal> cases) {
  for (const Refusal& c : cases) {
    auto r = parse(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_EQ(r.error(), "\"" + std::string(c.text) + "\" " + std::string(lead) + ": " + std::string(c.fault));
  }
}

}  // namespace phub::test
