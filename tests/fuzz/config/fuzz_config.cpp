// libFuzzer target: arbitrary text through the sandboxed config loader, under small limits.
// Whatever loads must validate and survive dump_lua -> load_string unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "phub/config/load.hpp"

using namespace phub::config;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

LoadLimits small_limits() {
  LoadLimits l;
  l.max_instructions = 200'000;
  l.max_memory_bytes = 8u << 20;
  l.max_wall_ms = 1000;
  l.max_values = 20'000;
  return l;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const LoadLimits limits = small_limits();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = load_string(text, "fuzz.lua", limits);
  if (!cfg.has_value()) {
    check(!cfg.error().empty());
    return 0;
  }
  check(validate(*cfg).has_value());
  check(!describe(*cfg).empty());
  auto again = load_string(dump_lua(*cfg), "dumped.lua");
  check(again.has_value() && *again == *cfg);
  return 0;
}
