// Bounded line assembly: lines across reads, several lines per read, CRLF, the length limit.
#include "phub/ctl/line_buffer.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace phub::ctl {
namespace {

void feed(LineBuffer& b, std::string_view bytes) {
  auto room = b.free_space();
  ASSERT_GE(room.size(), bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  b.commit(bytes.size());
}

TEST(LineBuffer, LineAcrossReads) {
  LineBuffer b;
  feed(b, "sta");
  EXPECT_FALSE(b.take_line());
  feed(b, "tus");
  EXPECT_FALSE(b.has_line());
  feed(b, "\n");
  EXPECT_EQ(b.take_line(), "status");
  EXPECT_EQ(b.held_bytes(), 0u);
}

TEST(LineBuffer, SeveralLinesInOneRead) {
  LineBuffer b;
  feed(b, "version\r\njob a\n\njo");
  EXPECT_EQ(b.take_line(), "version");
  EXPECT_EQ(b.take_line(), "job a");
  EXPECT_EQ(b.take_line(), "");
  EXPECT_FALSE(b.take_line());
  EXPECT_EQ(b.held_bytes(), 2u);
}

TEST(LineBuffer, OnlyOneCarriageReturnIsTaken) {
  LineBuffer b;
  feed(b, "x\r\r\n");
  EXPECT_EQ(b.take_line(), "x\r");
}

TEST(LineBuffer, LongestLineFitsExactly) {
  LineBuffer b(16);
  feed(b, std::string(15, 'a') + "\n");
  EXPECT_FALSE(b.too_long());
  EXPECT_EQ(b.take_line(), std::string(15, 'a'));
  EXPECT_EQ(b.free_space().size(), 16u);
}

TEST(LineBuffer, FullWithoutNewlineIsTooLong) {
  LineBuffer b(16);
  feed(b, std::string(15, 'a'));
  EXPECT_FALSE(b.too_long());
  feed(b, "a");
  EXPECT_TRUE(b.too_long());
  EXPECT_TRUE(b.free_space().empty());
  EXPECT_FALSE(b.take_line());
}

TEST(LineBuffer, DefaultCapacityIsTheRequestLimit) {
  LineBuffer b;
  EXPECT_EQ(b.free_space().size(), kMaxRequestBytes);
}

}  // namespace
}  // namespace phub::ctl
