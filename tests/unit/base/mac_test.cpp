// MAC addresses as text (phub/base/mac.hpp): round trips, equality, and a named fault for every bad form.
#include "phub/base/mac.hpp"

#include <gtest/gtest.h>

#include "text_checks.hpp"

namespace phub {
namespace {

TEST(MacText, ParsesEitherCaseAndFormatsLowerCase) {
  auto m = parse_mac_address("02:aB:cd:EF:00:ff");
  ASSERT_TRUE(m);
  EXPECT_EQ(*m, (MacAddr{0x02, 0xab, 0xcd, 0xef, 0x00, 0xff}));
  EXPECT_EQ(format_mac(*m), "02:ab:cd:ef:00:ff");
  EXPECT_EQ(format_mac(kBroadcastMac), "ff:ff:ff:ff:ff:ff");
  EXPECT_EQ(format_mac(MacAddr{}), "00:00:00:00:00:00");
  test::expect_round_trips(parse_mac_address, format_mac,
                           {MacAddr{}, kBroadcastMac, MacAddr{0x02, 0x70, 0x67, 0, 0, 1}});
}

// Each malformed address is refused with the text quoted and the fault named.
TEST(MacText, NamesTheFaultOfEveryMalformedAddress) {
  test::expect_refusals(parse_mac_address, "is not a MAC address",
                        {
                            {"", "it is empty"},
                            {"02:ab:cd:ef:00", "it has 5 colon-separated octets, not 6"},
                            {"02:ab:cd:ef:00:ff:", "it has 7 colon-separated octets, not 6"},
                            {"02-ab-cd-ef-00-ff", "it has 1 colon-separated octet, not 6"},
                            {"02abcdef00ff", "it has 1 colon-separated octet, not 6"},
                            {"g2:ab:cd:ef:00:ff", "octet 1 (\"g2\") is not two hex digits"},
                            {"2:ab:cd:ef:00:ff", "octet 1 (\"2\") is not two hex digits"},
                            {"02:ab:cd:ef:00:fff", "octet 6 (\"fff\") is not two hex digits"},
                            {"02:ab:cd:ef:00:100", "octet 6 (\"100\") is not two hex digits"},
                            {"02:ab::ef:00:ff", "octet 3 (\"\") is not two hex digits"},
                            {"02:ab:cd:ef:00: f", "octet 6 (\" f\") is not two hex digits"},
                            {"0x:ab:cd:ef:00:ff", "octet 1 (\"0x\") is not two hex digits"},
                            {"+2:ab:cd:ef:00:ff", "octet 1 (\"+2\") is not two hex digits"},
                        });
}

TEST(Mac, EqualComparesEveryBit) {
  const MacAddr base{0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  EXPECT_TRUE(mac_equal(base, base));
  for (size_t i = 0; i < base.size(); ++i) {
    for (uint8_t bit = 1; bit != 0; bit = static_cast<uint8_t>(bit << 1)) {
      MacAddr other = base;
      other[i] = static_cast<uint8_t>(other[i] ^ bit);
      EXPECT_FALSE(mac_equal(base, other)) << i << " " << int{bit};
      EXPECT_FALSE(mac_equal(other, base));
    }
  }
}

}  // namespace
}  // namespace phub
