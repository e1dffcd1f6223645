// Parsing of agent endpoints and hosts files.
#include "hosts_file.hpp"

#include <charconv>
#include <fstream>
#include <set>
#include <sstream>

#include "auth.hpp"
#include "phub/base/ipv4.hpp"

namespace phub::probe {

Expected<topo::Host, std::string> parse_endpoint(std::string_view text) {
  topo::Host h;
  const size_t colon = text.rfind(':');
  const std::string_view addr = colon == std::string_view::npos ? text : text.substr(0, colon);
  h.addr = std::string(addr);
  h.port = kDefaultPort;
  if (colon != std::string_view::npos) {
    const std::string_view port = text.substr(colon + 1);
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (ec != std::errc{} || end != port.data() + port.size() || v == 0 || v > 65535)
      return unexpected("bad port in \"" + std::string(text) + "\"");
    h.port = static_cast<uint16_t>(v);
  }
  if (auto ip = parse_ipv4_address(h.addr); !ip) return unexpected(ip.error());
  h.name = h.addr;
  return h;
}

Expected<HostsFile, std::string> parse_hosts_file(std::string_view text) {
  HostsFile out;
  std::vector<topo::Host>& hosts = out.hosts;
  std::set<std::string> names, endpoints;
  std::istringstream in{std::string(text)};
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w.empty()) continue;
    const std::string where = "line " + std::to_string(lineno) + ": ";
    if (w.size() == 3 && w[0] == "token" && w[1] == "=") {
      if (!out.token.empty()) return unexpected(where + "a second token line");
      auto token = check_token(w[2], "line " + std::to_string(lineno));
      if (!token) return unexpected(token.error());
      out.token = std::move(*token);
      continue;
    }
    if (w.size() > 2) return unexpected(where + "expected \"[name] addr[:port]\" or \"token = VALUE\"");
    auto h = parse_endpoint(w.back());
    if (!h) return unexpected(where + h.error());
    if (w.size() == 2) h->name = w[0];
    if (!names.insert(h->name).second) return unexpected(where + "duplicate host name " + h->name);
    if (!endpoints.insert(h->addr + ":" + std::to_string(h->port)).second)
      return unexpected(where + "duplicate endpoint " + h->addr + ":" + std::to_string(h->port));
    hosts.push_back(std::move(*h));
  }
  if (hosts.size() < 2) return unexpected(std::string("a hosts file needs at least two hosts"));
  return out;
}

Expected<std::vector<topo::Host>, std::string> parse_hosts(std::string_view text) {
  auto f = parse_hosts_file(text);
  if (!f) return unexpected(f.error());
  return std::move(f->hosts);
}

Expected<std::string, std::string> read_text_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return unexpected("cannot open " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace phub::probe
