// --print-boot-info: the config's EAL arguments and port devices as JSON (read by tools/phub-boot).
#include "boot_info.hpp"

#include <cstdio>

namespace phub::server {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

std::string boot_info_json(const config::Config& cfg, const std::vector<std::string>& eal_args) {
  std::string out = "{\"eal_args\": [";
  for (size_t i = 0; i < eal_args.size(); ++i) out += (i ? ", " : "") + quoted(eal_args[i]);
  out += "], \"ports\": [";
  for (size_t i = 0; i < cfg.ports.size(); ++i) {
    out += (i ? ", " : "");
    out += "{\"name\": " + quoted(cfg.ports[i].name) + ", \"device\": " + quoted(cfg.ports[i].device) + "}";
  }
  return out + "]}\n";
}

}  // namespace phub::server
