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

struct HostsFile {
  std::vector<topo::Host> hosts;
  std::string token;  // from a "token = VALUE" line (empty without one)
};

// Whole file text; errors name the line. Names and endpoints must be unique. A line "token = VALUE" gives
// the control channel's token (auth.hpp), at most once.
[[nodiscard]] Expected<HostsFile, std::string> parse_hosts_file(std::string_view text);
// The hosts alone.
[[nodiscard]] Expected<std::vector<topo::Host>, std::string> parse_hosts(std::string_view text);

[[nodiscard]] Expected<std::string, std::string> read_text_file(const std::string& path);

}  // namespace phub::probe
