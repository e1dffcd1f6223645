// Tests of hyperparameter sets (hparams.hpp) and of the header rules that came with them: the tail, the
// nonfinite flag, state arrays in status, the hparams opcodes.
#include "phub/proto/hparams.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "phub/base/bytes.hpp"
#include "phub/proto/header.hpp"
#include "test_util.hpp"

namespace phub::proto {
namespace {

Hparams adamw() {
  Hparams h;
  h.family = HparamsFamily::adamw;
  h.lr = 3e-4;
  h.beta1 = 0.9;
  h.beta2 = 0.95;
  h.eps = 1e-8;
  h.weight_decay = 0.1;
  return h;
}

Hparams nesterov() {
  Hparams h;
  h.family = HparamsFamily::sgd;
  h.nesterov = true;
  h.lr = 0.05;
  h.momentum = 0.9;
  h.weight_decay = 1e-4;
  return h;
}

TEST(Hparams, RoundTripsToTheBit) {
  for (const Hparams& h : {adamw(), nesterov()}) {
    const HparamsWire w = encode_hparams(h);
    const auto back = parse_hparams(w);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, h);
    EXPECT_EQ(load_be<uint64_t>(w.data() + 8), std::bit_cast<uint64_t>(h.lr));  // binary64, big-endian
  }
}

TEST(Hparams, TheIdNamesTheValuesExactly) {
  const uint64_t id = hparams_id(adamw());
  EXPECT_NE(id, 0u);
  EXPECT_EQ(id, hparams_id(adamw()));
  Hparams h = adamw();
  h.lr = std::nextafter(h.lr, 1.0);  // one ulp of a double: another set
  EXPECT_NE(hparams_id(h), id);
  EXPECT_NE(hparams_id(nesterov()), id);
  EXPECT_EQ(id_of_fields(static_cast<uint32_t>(id >> 32), static_cast<uint32_t>(id)), id);
}

TEST(Hparams, ValuesTorchRefusesAreRefusedByName) {
  struct Case {
    Hparams h;
    const char* why;
  };
  auto with = [](Hparams h, auto f) {
    f(h);
    return h;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Case cases[] = {
      {with(adamw(), [](Hparams& h) { h.lr = -1; }), "lr is negative"},
      {with(adamw(), [&](Hparams& h) { h.eps = inf; }), "eps is not finite"},
      {with(adamw(), [](Hparams& h) { h.beta2 = 1.0; }), "beta2 must be below 1"},
      {with(adamw(), [](Hparams& h) { h.momentum = 0.9; }), "momentum and nesterov belong to SGD"},
      {with(nesterov(), [](Hparams& h) { h.momentum = 0; }), "nesterov needs a momentum above 0"},
      {with(nesterov(), [](Hparams& h) { h.beta1 = 0.9; }), "betas and eps belong to Adam"},
      {with(nesterov(), [](Hparams& h) { h.weight_decay = std::nan(""); }), "weight_decay is not finite"},
  };
  for (const Case& c : cases) {
    const std::string why = hparams_refusal(c.h);
    EXPECT_NE(why.find(c.why), std::string::npos) << why;
    EXPECT_FALSE(parse_hparams(encode_hparams(c.h)).has_value()) << c.why;
  }
  EXPECT_EQ(hparams_refusal(adamw()), "");
}

TEST(Hparams, MalformedWireIsRefused) {
  const HparamsWire good = encode_hparams(adamw());
  for (size_t at : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}}) {
    HparamsWire w = good;
    w[at] = std::byte{0x40};  // version, family, unknown flag, reserved bytes
    EXPECT_FALSE(parse_hparams(w).has_value()) << at;
  }
  EXPECT_FALSE(parse_hparams(std::span(good).first(55)).has_value());
}

std::vector<std::byte> message(Header h, size_t payload_bytes) {
  std::vector<std::byte> out(kHeaderBytes + payload_bytes);
  h.payload_bytes = static_cast<uint16_t>(payload_bytes);
  write_header(h, std::span<std::byte, kHeaderBytes>(out.data(), kHeaderBytes));
  return out;
}

TEST(HeaderTail, APushWithATailCarriesEightMoreBytes) {
  Header h = test::sample_header(8);
  h.flags = flag::tail | flag::nonfinite;
  EXPECT_TRUE(parse_header(message(h, 8 * 4 + kTailBytes)).has_value());
  EXPECT_EQ(parse_header(message(h, 8 * 4)).error(), ParseError::elem_count_mismatch);
}

TEST(HeaderTail, FlagsOnlyWhereTheyMeanSomething) {
  Header h = test::sample_header(0);
  h.opcode = Opcode::pull;
  h.flags = flag::nonfinite;
  EXPECT_EQ(parse_header(message(h, 0)).error(), ParseError::bad_flags);
  h.flags = flag::tail;
  EXPECT_EQ(parse_header(message(h, 0)).error(), ParseError::bad_flags);
  h.opcode = Opcode::fwd_result;  // a skipped round's result across racks: nonfinite, no tail
  h.flags = flag::nonfinite;
  EXPECT_TRUE(parse_header(message(h, 0)).has_value());
  // follows_map: a join's only.
  for (Opcode op : {Opcode::push, Opcode::pull, Opcode::joined, Opcode::result, Opcode::leave}) {
    h.opcode = op;
    h.flags = flag::follows_map;
    EXPECT_EQ(parse_header(message(h, 0)).error(), ParseError::bad_flags) << static_cast<int>(op);
  }
  h.opcode = Opcode::join;
  EXPECT_TRUE(parse_header(message(h, kHandshakePayloadBytes)).has_value());
}

TEST(HeaderTail, StateArraysInStatus) {
  Header h = test::sample_header(0);
  h.opcode = Opcode::pull;
  h.status = static_cast<Status>(kStateArrayMax);
  EXPECT_TRUE(parse_header(message(h, 0)).has_value());
  h.status = static_cast<Status>(kStateArrayMax + 1);
  EXPECT_EQ(parse_header(message(h, 0)).error(), ParseError::bad_status);
  Header r = test::sample_header(4, Dtype::bf16);
  r.opcode = Opcode::result;
  r.status = static_cast<Status>(StateArray::moment1);
  EXPECT_EQ(parse_header(message(r, 8)).error(), ParseError::bad_dtype);  // state arrays are fp32
  r.dtype = Dtype::fp32;
  r.flags = flag::tail;
  EXPECT_TRUE(parse_header(message(r, 16 + kTailBytes)).has_value());
}

TEST(HeaderTail, HparamsMessagesCarryASetOrNothing) {
  Header h = test::sample_header(0);
  h.opcode = Opcode::hparams;
  EXPECT_TRUE(parse_header(message(h, kHparamsBytes)).has_value());
  EXPECT_TRUE(parse_header(message(h, 0)).has_value());
  EXPECT_EQ(parse_header(message(h, 10)).error(), ParseError::unexpected_payload);
  h.opcode = Opcode::fwd_hparams;
  h.flags = flag::crc;  // a hub message's crc32c is its payload MAC
  EXPECT_EQ(parse_header(message(h, kHparamsBytes)).error(), ParseError::bad_forward);
}

}  // namespace
}  // namespace phub::proto
