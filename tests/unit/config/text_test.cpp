// Parsing and formatting of addresses, MACs and sizes (phub/config/text.hpp).
#include <gtest/gtest.h>

#include "phub/config/text.hpp"

namespace phub::config {
namespace {

TEST(Text, Ipv4) {
  EXPECT_EQ(parse_ipv4("198.18.0.1"), (198u << 24) | (18u << 16) | 1u);
  EXPECT_EQ(parse_ipv4("0.0.0.0"), 0u);
  EXPECT_EQ(parse_ipv4("255.255.255.255"), 0xffffffffu);
  for (const char* bad : {"", "1.2.3", "1.2.3.4.5", "1.2.3.256", "01.2.3.4", "1..3.4", "1.2.3.4 ", "a.b.c.d", "1.2.3.-4"}) {
    EXPECT_FALSE(parse_ipv4(bad).has_value()) << bad;
  }
  for (uint32_t a : {0u, 1u, 0x7f000001u, 0xc6120001u, 0xffffffffu}) EXPECT_EQ(parse_ipv4(format_ipv4(a)), a);
}

TEST(Text, Prefix) {
  auto p = parse_ipv4_prefix("198.18.0.0/15");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->prefix_len, 15);
  EXPECT_EQ(format_prefix(*p), "198.18.0.0/15");
  for (const char* bad : {"198.18.0.0", "198.18.0.0/", "198.18.0.0/33", "198.18.0.0/08", "/24", "1.2.3.4/2x"}) {
    EXPECT_FALSE(parse_ipv4_prefix(bad).has_value()) << bad;
  }
}

TEST(Text, Mac) {
  auto m = parse_mac("02:aB:cd:EF:00:ff");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(format_mac(*m), "02:ab:cd:ef:00:ff");
  for (const char* bad : {"02:ab:cd:ef:00", "02:ab:cd:ef:00:ff:", "02-ab-cd-ef-00-ff", "g2:ab:cd:ef:00:ff"}) {
    EXPECT_FALSE(parse_mac(bad).has_value()) << bad;
  }
}

TEST(Text, Size) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("32KiB"), 32u << 10);
  EXPECT_EQ(parse_size("32 KiB"), 32u << 10);
  EXPECT_EQ(parse_size("3GiB"), 3ull << 30);
  EXPECT_EQ(parse_size("2TiB"), 2ull << 40);
  EXPECT_EQ(parse_size("5MB"), 5'000'000u);
  EXPECT_EQ(parse_size("7B"), 7u);
  for (const char* bad : {"", "KiB", "1.5GiB", "12XB", "1 2KiB", "-1", "32kib", "32  KiB", "99999999999TiB"}) {
    EXPECT_FALSE(parse_size(bad).has_value()) << bad;
  }
  for (uint64_t b : {1ull, 1000ull, 1024ull, 32768ull, 3ull << 30, 1ull << 50}) EXPECT_EQ(parse_size(format_size(b)), b);
  EXPECT_EQ(format_size(32768), "32KiB");
  EXPECT_EQ(format_size(1000), "1000B");
}

}  // namespace
}  // namespace phub::config
