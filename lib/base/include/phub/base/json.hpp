// JSON documents for reports and summaries, on nlohmann-json: one type and one text form for every tool.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace phub {

// Members keep the order they were added in.
using Json = nlohmann::ordered_json;

// The text of `doc`, indented two spaces a level and ending with a newline. Numbers: a double with no
// fraction and a magnitude below 1e15 is written as an integer ("12"), any other finite double rounded to six
// significant digits, NaN and infinities as null; integer types exactly. Strings: '"', '\\' and the control
// characters are escaped; a byte that does not belong to valid UTF-8 becomes U+FFFD.
[[nodiscard]] std::string json_text(Json doc);

}  // namespace phub
