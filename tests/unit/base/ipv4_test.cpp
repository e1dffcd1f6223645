// IPv4 addresses and prefixes as text (phub/base/ipv4.hpp): round trips, and a named fault for every bad form.
#include "phub/base/ipv4.hpp"

#include <gtest/gtest.h>

#include "text_checks.hpp"

namespace phub {
namespace {

TEST(Ipv4Text, ParsesDottedQuads) {
  EXPECT_EQ(*parse_ipv4_address("198.18.0.1"), (198u << 24) | (18u << 16) | 1u);
  EXPECT_EQ(*parse_ipv4_address("0.0.0.0"), 0u);
  EXPECT_EQ(*parse_ipv4_address("255.255.255.255"), 0xffffffffu);
  EXPECT_EQ(*parse_ipv4_address("10.0.100.200"), 0x0a0064c8u);
}

TEST(Ipv4Text, FormatsAndRoundTrips) {
  EXPECT_EQ(format_ipv4(0xC6120107), "198.18.1.7");
  EXPECT_EQ(format_ipv4(0), "0.0.0.0");
  EXPECT_EQ(format_ipv4(0xffffffffu), "255.255.255.255");
  test::expect_round_trips(parse_ipv4_address, format_ipv4,
                           {0u, 1u, 0x7f000001u, 0xc6120001u, 0x0a0a0a0au, 0xffffffffu});
}

// Each malformed address is refused with the text quoted and the fault named.
TEST(Ipv4Text, NamesTheFaultOfEveryMalformedAddress) {
  test::expect_refusals(parse_ipv4_address, "is not an IPv4 address",
                        {
                            {"", "it is empty"},
                            {"1.2.3", "it has 3 dot-separated octets, not 4"},
                            {"1.2.3.4.5", "it has 5 dot-separated octets, not 4"},
                            {"1234", "it has 1 dot-separated octet, not 4"},
                            {"host.example", "it has 2 dot-separated octets, not 4"},
                            {"1..3.4", "octet 2 is empty"},
                            {".1.2.3", "octet 1 is empty"},
                            {"1.2.3.", "octet 4 is empty"},
                            {"1.2.3.256", "octet 4 (256) is above 255"},
                            {"1.2.3.99999999999999999999", "octet 4 (99999999999999999999) is above 255"},
                            {"01.2.3.4", "octet 1 (\"01\") has a leading zero"},
                            {"1.2.3.00", "octet 4 (\"00\") has a leading zero"},
                            {"a.b.c.d", "octet 1 (\"a\") is not a decimal number"},
                            {"1.2.3.-4", "octet 4 (\"-4\") is not a decimal number"},
                            {"1.2.3.+4", "octet 4 (\"+4\") is not a decimal number"},
                            {"1.2.3.4 ", "octet 4 (\"4 \") is not a decimal number"},
                            {" 1.2.3.4", "octet 1 (\" 1\") is not a decimal number"},
                            {"0x1.2.3.4", "octet 1 (\"0x1\") is not a decimal number"},
                            {"1.2.3.4/24", "octet 4 (\"4/24\") is not a decimal number"},
                        });
  // A NUL inside the text is not a terminator.
  EXPECT_FALSE(parse_ipv4_address(std::string_view("1.2.3.4\0", 8)));
}

TEST(Ipv4Text, Prefixes) {
  auto p = parse_ipv4_prefix("198.18.0.0/15");
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (Ipv4Prefix{0xc6120000u, 15}));
  EXPECT_EQ(format_ipv4_prefix(*p), "198.18.0.0/15");
  EXPECT_EQ(parse_ipv4_prefix("0.0.0.0/0")->prefix_len, 0);
  EXPECT_EQ(parse_ipv4_prefix("198.18.0.5/32")->addr, 0xc6120005u);  // host bits are the caller's business

  test::expect_refusals(parse_ipv4_prefix, "is not an IPv4 prefix (a.b.c.d/len)",
                        {
                            {"198.18.0.0", "it has no \"/len\""},
                            {"", "it has no \"/len\""},
                            {"198.18.0.0/", "the length is empty"},
                            {"198.18.0.0/33", "the length (33) is above 32"},
                            {"198.18.0.0/08", "the length (\"08\") has a leading zero"},
                            {"1.2.3.4/2x", "the length (\"2x\") is not a decimal number"},
                            {"1.2.3.4/24/1", "the length (\"24/1\") is not a decimal number"},
                            {"/24", "its address: it is empty"},
                            {"10.0.0.300/24", "its address: octet 4 (300) is above 255"},
                        });
}

TEST(Ipv4Text, Netmasks) {
  EXPECT_EQ(ipv4_netmask(0), 0u);
  EXPECT_EQ(ipv4_netmask(1), 0x80000000u);
  EXPECT_EQ(ipv4_netmask(15), 0xfffe0000u);
  EXPECT_EQ(ipv4_netmask(24), 0xffffff00u);
  EXPECT_EQ(ipv4_netmask(32), 0xffffffffu);
}

}  // namespace
}  // namespace phub
