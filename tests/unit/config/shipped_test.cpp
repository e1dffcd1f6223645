// The shipped configs (the embedded default and the examples) load, validate and round-trip.
#include <fstream>
#include <sstream>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

class Shipped : public ::testing::TestWithParam<const char*> {};

TEST_P(Shipped, LoadsValidatesAndRoundTrips) {
  auto cfg = load_file(source_path(GetParam()));
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  EXPECT_TRUE(validate(*cfg).has_value());
  EXPECT_FALSE(cfg->ports.empty());
  EXPECT_FALSE(cfg->lcores.empty());
  EXPECT_FALSE(cfg->jobs.empty());
  for (const Job& j : cfg->jobs) {
    EXPECT_NE(describe(*cfg).find(j.name), std::string::npos) << j.name;
  }
  std::string dumped = dump_lua(*cfg);
  auto again = load_string(dumped, "dumped.lua");
  ASSERT_TRUE(again.has_value()) << again.error() << "\n" << dumped;
  EXPECT_TRUE(*again == *cfg) << dumped;
  EXPECT_EQ(dump_lua(*again), dumped);
  // Redacted (phub-ctl config, --print-config): no secret appears, and the dump loads only once every
  // redacted secret is given again, naming each one.
  const std::string redacted = dump_lua(*cfg, Secrets::redacted);
  size_t secrets = 0;
  for (const Job& j : cfg->jobs) {
    if (j.secret.empty()) continue;
    ++secrets;
    EXPECT_EQ(redacted.find(j.secret), std::string::npos) << j.name << "'s secret is in the redacted dump";
  }
  if (secrets == 0) return;
  auto refused = load_string(redacted, "redacted.lua");
  ASSERT_FALSE(refused.has_value()) << "a redacted dump loaded";
  EXPECT_NE(refused.error().find("secret: redacted (phub-ctl config and phub-server --print-config print no secret)"),
            std::string::npos) << refused.error();
}

INSTANTIATE_TEST_SUITE_P(Configs, Shipped,
                         ::testing::Values("config/phub.lua", "config/examples/rack.lua",
                                           "config/examples/two-rack.lua", "config/examples/tenants.lua"));

TEST(Shipped, EmbeddedDefaultIsConfigPhubLua) {
  std::ifstream in(source_path("config/phub.lua"), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  ASSERT_FALSE(text.str().empty());
  EXPECT_EQ(embedded_default(), text.str());
  auto cfg = load_string(embedded_default(), "phub.lua");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  auto from_file = load_file(source_path("config/phub.lua"));
  ASSERT_TRUE(from_file.has_value());
  EXPECT_TRUE(*cfg == *from_file);
}

// What the demo needs: a veth via af_packet, idle back-off on 2 CPUs, an allreduce mean and a ps job.
TEST(Shipped, DefaultIsTheDemo) {
  auto cfg = load_string(embedded_default(), "phub.lua");
  ASSERT_TRUE(cfg.has_value()) << cfg.error();
  ASSERT_EQ(cfg->ports.size(), 1u);
  EXPECT_EQ(cfg->ports[0].device.rfind("net_af_packet", 0), 0u);
  EXPECT_GT(cfg->polling.idle_polls_before_sleep, 0u);
  EXPECT_GT(cfg->polling.idle_sleep_us, 0u);
  ASSERT_EQ(cfg->jobs.size(), 2u);
  EXPECT_EQ(cfg->jobs[0].mode, JobMode::allreduce);
  EXPECT_EQ(cfg->jobs[0].reduce, Reduce::mean);
  EXPECT_EQ(cfg->jobs[0].workers, 4);
  EXPECT_EQ(cfg->jobs[1].mode, JobMode::ps);
  EXPECT_EQ(cfg->jobs[1].optimizer.kind, OptimizerKind::adam);
}

}  // namespace
}  // namespace phub::config::test
