// Client settings: parsing of server lists and the validation messages that name each field.
#include <gtest/gtest.h>

#include "phub/base/ipv4.hpp"
#include "phub/client/options.hpp"

namespace phub::client {
namespace {

Options good() {
  Options o;
  o.servers = {0xC6120001};
  o.port_base = 40000;
  o.job_id = 1;
  o.workers = 4;
  o.rank = 3;
  return o;
}

TEST(ClientOptions, ParsesServerLists) {
  auto one = parse_servers("198.18.0.1");
  ASSERT_TRUE(one);
  EXPECT_EQ(*one, std::vector<uint32_t>{0xC6120001});
  auto two = parse_servers("198.18.0.1, 198.18.1.7");
  ASSERT_TRUE(two);
  EXPECT_EQ(*two, (std::vector<uint32_t>{0xC6120001, 0xC6120107}));
  EXPECT_FALSE(parse_servers(""));
  EXPECT_FALSE(parse_servers("198.18.0.1,"));
  EXPECT_FALSE(parse_servers("198.18.0.256"));
  EXPECT_FALSE(parse_servers("host.example"));
  EXPECT_EQ(format_ipv4(0xC6120107), "198.18.1.7");
}

TEST(ClientOptions, AcceptsAGoodConfig) { EXPECT_TRUE(validate(good())); }

// Each bad field is refused with a message that names it.
TEST(ClientOptions, NamesTheBadField) {
  struct Case {
    const char* field;
    void (*breaks)(Options&);
  };
  const Case cases[] = {
      {"servers", [](Options& o) { o.servers.clear(); }},
      {"server_lcores", [](Options& o) { o.server_lcores = 0; }},
      {"port_base", [](Options& o) { o.port_base = 0; }},
      {"port_base", [](Options& o) { o.port_base = 65535, o.server_lcores = 2; }},
      {"job_id", [](Options& o) { o.job_id = 0; }},
      {"workers", [](Options& o) { o.workers = 0; }},
      {"rank", [](Options& o) { o.rank = 4; }},
      {"chunk_bytes", [](Options& o) { o.chunk_bytes = 1000; }},
      {"chunk_bytes", [](Options& o) { o.chunk_bytes = 2u << 20; }},
      {"mtu", [](Options& o) { o.mtu = 100; }},
      {"round_modulus", [](Options& o) { o.round_modulus = 1; }},
      {"timeout_ms", [](Options& o) { o.timeout_ms = 0; }},
      {"rto_initial_us", [](Options& o) { o.rto_initial_us = o.rto_max_us + 1; }},
      {"window_packets", [](Options& o) { o.window_packets = 2; }},
      {"socket_buffer_bytes", [](Options& o) { o.socket_buffer_bytes = 1000; }},
      {"fault", [](Options& o) { o.faults.drop_tx_ppm = 2000000; }},
  };
  for (const auto& c : cases) {
    Options o = good();
    c.breaks(o);
    auto v = validate(o);
    ASSERT_FALSE(v) << c.field;
    EXPECT_EQ(v.error().code, PHUB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(v.error().message.find(c.field), std::string::npos) << v.error().message;
  }
}

}  // namespace
}  // namespace phub::client
