// The hosts file of `phub-probe run`: one agent per line, "[name] addr[:port]", '#' comments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/topo/matrix.hpp"

namespace phub::probe {

inline constexpr uint16_t kDefaultPort = 7700;

// "a.b.c.d[:port]" into a host (name = the address text).
[[nodiscard]] Expected<topo::Host, std::string> parse_endpoint(std::string_view text);

// Whole file text; errors name the line. Names and endpoints must be unique.
[[nodiscard]] Expected<std::vector<topo::Host>, std::string> parse_hosts(std::string_view text);

[[nodiscard]] Expected<std::string, std::string> read_text_file(const std::string& path);

}  // namespace phub::probe
