// C API argument checking: NULLs, struct versions, enum ranges, key registration rules, calls in the
// wrong mode or order; every failure has a code and a message.
#include <gtest/gtest.h>

#include <string>

#include "phub/client.h"

namespace {

phub_config base() {
  phub_config c;
  phub_config_init(&c);
  c.servers = "127.0.0.1";
  c.port_base = 45999;
  c.job_id = 1;
  c.workers = 2;
  return c;
}

int connect_with(phub_config c) {
  phub_client* cl = nullptr;
  const int st = phub_connect(&c, &cl);
  EXPECT_EQ(phub_close(cl), PHUB_OK);
  return st;
}

TEST(ClientCApi, DefaultsAreSet) {
  phub_config c;
  phub_config_init(&c);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.chunk_bytes, 32768u);
  EXPECT_EQ(c.mtu, 1500);
  EXPECT_GT(c.timeout_ms, 0u);
  EXPECT_GT(c.window_packets, 0u);
}

TEST(ClientCApi, RefusesBadConfigs) {
  EXPECT_EQ(phub_connect(nullptr, nullptr), PHUB_ERR_INVALID_ARGUMENT);
  phub_client* cl = nullptr;
  EXPECT_EQ(phub_connect(nullptr, &cl), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(cl, nullptr);
  struct Case {
    const char* text;
    void (*breaks)(phub_config&);
  };
  const Case cases[] = {
      {"struct_size", [](phub_config& c) { c.struct_size = 8; }},
      {"servers", [](phub_config& c) { c.servers = nullptr; }},
      {"servers", [](phub_config& c) { c.servers = "not-an-address"; }},
      {"mode", [](phub_config& c) { c.mode = static_cast<phub_mode>(7); }},
      {"dtype", [](phub_config& c) { c.dtype = static_cast<phub_dtype>(3); }},
      {"reduce", [](phub_config& c) { c.reduce = static_cast<phub_reduce>(2); }},
      {"flags", [](phub_config& c) { c.flags = 0x80; }},
      {"rank", [](phub_config& c) { c.rank = 2; }},
      {"bind_address", [](phub_config& c) { c.bind_address = "300.1.1.1"; }},
  };
  for (const auto& k : cases) {
    phub_config c = base();
    k.breaks(c);
    EXPECT_EQ(connect_with(c), PHUB_ERR_INVALID_ARGUMENT) << k.text;
    EXPECT_NE(std::string(phub_last_error()).find(k.text), std::string::npos) << phub_last_error();
  }
}

TEST(ClientCApi, NullHandlesAreRefused) {
  std::vector<float> buf(4);
  phub_request* req = nullptr;
  int done = 0;
  EXPECT_EQ(phub_register(nullptr, 0, 4, PHUB_FP32), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_allreduce(nullptr, 0, buf.data()), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_allreduce_async(nullptr, 0, buf.data(), &req), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_wait(nullptr, nullptr), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_test(nullptr, nullptr, &done), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_init(nullptr, 0, buf.data()), PHUB_ERR_INVALID_ARGUMENT);
  uint32_t round = 0;
  EXPECT_EQ(phub_start_round(nullptr, &round), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_get_stats(nullptr, nullptr), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_close(nullptr), PHUB_OK);
  EXPECT_STRNE(phub_last_error(), "");
}

TEST(ClientCApi, KeysAreRegisteredInOrderWithTheJobsDtype) {
  phub_config c = base();
  phub_client* cl = nullptr;
  ASSERT_EQ(phub_connect(&c, &cl), PHUB_OK) << phub_last_error();
  EXPECT_EQ(phub_register(cl, 1, 10, PHUB_FP32), PHUB_ERR_INVALID_ARGUMENT);  // key 0 first
  EXPECT_NE(std::string(phub_last_error()).find("expected key 0"), std::string::npos);
  EXPECT_EQ(phub_register(cl, 0, 10, PHUB_BF16), PHUB_ERR_INVALID_ARGUMENT);  // the job is fp32
  EXPECT_EQ(phub_register(cl, 0, 0, PHUB_FP32), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_register(cl, 0, 10, static_cast<phub_dtype>(9)), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_register(cl, 0, 10, PHUB_FP32), PHUB_OK);
  uint32_t chunks = 0;
  EXPECT_EQ(phub_finalize(cl, &chunks), PHUB_OK);
  EXPECT_EQ(chunks, 1u);
  EXPECT_EQ(phub_register(cl, 1, 10, PHUB_FP32), PHUB_ERR_STATE);  // frozen
  std::vector<float> buf(10);
  EXPECT_EQ(phub_allreduce(cl, 5, buf.data()), PHUB_ERR_INVALID_ARGUMENT);  // not registered
  EXPECT_EQ(phub_allreduce(cl, 0, nullptr), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_step(cl, 0, buf.data(), buf.data()), PHUB_ERR_STATE);  // not a ps job
  EXPECT_EQ(phub_pull(cl, 0, buf.data()), PHUB_ERR_STATE);  // no push pending
  EXPECT_EQ(phub_close(cl), PHUB_OK);
}

TEST(ClientCApi, NoKeysIsAStateError) {
  phub_config c = base();
  phub_client* cl = nullptr;
  ASSERT_EQ(phub_connect(&c, &cl), PHUB_OK);
  std::vector<float> buf(4);
  EXPECT_EQ(phub_allreduce(cl, 0, buf.data()), PHUB_ERR_STATE);
  EXPECT_EQ(phub_close(cl), PHUB_OK);
}

TEST(ClientCApi, PsCallsNeedAPsJob) {
  phub_config c = base();
  c.mode = PHUB_MODE_PS;
  phub_client* cl = nullptr;
  ASSERT_EQ(phub_connect(&c, &cl), PHUB_OK);
  ASSERT_EQ(phub_register(cl, 0, 4, PHUB_FP32), PHUB_OK);
  std::vector<float> buf(4);
  EXPECT_EQ(phub_allreduce(cl, 0, buf.data()), PHUB_ERR_STATE);
  EXPECT_NE(std::string(phub_last_error()).find("ps"), std::string::npos);
  EXPECT_EQ(phub_step(cl, 0, nullptr, buf.data()), PHUB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(phub_close(cl), PHUB_OK);
}

TEST(ClientCApi, EveryStatusHasAName) {
  for (int s = PHUB_OK; s <= PHUB_ERR_NONFINITE; ++s) EXPECT_STRNE(phub_status_name(s), "unknown") << s;
  EXPECT_STREQ(phub_status_name(999), "unknown");
}

}  // namespace
