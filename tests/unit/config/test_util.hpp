// Helpers shared by the lib/config tests: source paths and loading a config that must fail.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "phub/config/load.hpp"

namespace phub::config::test {

inline std::string source_path(std::string_view rel) { return std::string(PHUB_SOURCE_ROOT) + "/" + std::string(rel); }

// A small valid config as a Lua table `cfg` (no return): two lcores, an allreduce job with a secret and an
// insecure ps job.
inline constexpr std::string_view kBase = R"lua(
local cfg = {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 }, { id = 2 } },
  jobs = {
    { id = 1, name = "a", workers = 4, port_base = 40000, secret = "a-secret-0123456789",
      keys = { { name = "w", elems = 1024 } } },
    { id = 2, name = "b", mode = "ps", workers = 2, port_base = 40010, insecure = true,
      keys = { { name = "w", elems = 1024 } } },
  },
}
)lua";

// kBase, then `patch` (Lua statements on cfg), then "return cfg".
inline std::string patched(std::string_view patch) {
  return std::string(kBase) + std::string(patch) + "\nreturn cfg\n";
}

// The error message of a load that must fail (an empty string and a test failure if it loaded).
inline std::string load_error(std::string_view text, const LoadLimits& limits = {}) {
  auto r = load_string(text, "test.lua", limits);
  EXPECT_FALSE(r.has_value()) << "loaded, but should have failed:\n" << text;
  return r.has_value() ? std::string() : r.error();
}

}  // namespace phub::config::test
