// Parsing and formatting of sizes (phub/config/text.hpp; addresses: tests/unit/base).
#include <gtest/gtest.h>

#include "phub/config/text.hpp"

namespace phub::config {
namespace {

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
