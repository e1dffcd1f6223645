// The text form of phub's JSON documents: phub's number rule applied to the tree, then nlohmann's writer.
#include "phub/base/json.hpp"

#include <charconv>
#include <cmath>

namespace phub {
namespace {

// Doubles as the text form promises them: integers where integral, six significant digits otherwise.
void settle_numbers(Json& j) {
  if (j.is_structured()) {
    for (Json& child : j) settle_numbers(child);
    return;
  }
  if (!j.is_number_float()) return;
  const double v = j.get<double>();
  if (!std::isfinite(v)) {
    j = nullptr;
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    j = static_cast<int64_t>(v);
  } else {
    char digits[32];
    const auto end = std::to_chars(digits, digits + sizeof digits, v, std::chars_format::general, 6).ptr;
    double rounded = v;
    std::from_chars(digits, end, rounded);
    j = rounded;
  }
}

}  // namespace

std::string json_text(Json doc) {
  settle_numbers(doc);
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + '\n';
}

}  // namespace phub
