// diff_configs: what a reload may change in place, and what it refuses with the field and the reason.
#include <gtest/gtest.h>

#include <algorithm>

#include "phub/engine/config_diff.hpp"

namespace phub::engine {
namespace {

config::Job job(uint32_t id, const std::string& name, uint16_t port_base) {
  config::Job j;
  j.id = id;
  j.name = name;
  j.workers = 4;
  j.port_base = port_base;
  j.quota_bytes = 1 << 20;
  j.keys = {{"w", 1000}, {"b", 10}};
  return j;
}

config::Config base() {
  config::Config c;
  c.eal_args = {"--no-huge"};
  config::Port p;
  p.name = "p0";
  p.device = "net_null0";
  c.ports = {p};
  c.lcores = {{1, {}}, {2, {}}};
  c.jobs = {job(1, "a", 40000), job(2, "b", 40100), job(3, "c", 40200)};
  return c;
}

bool has(const std::vector<uint32_t>& v, uint32_t id) { return std::find(v.begin(), v.end(), id) != v.end(); }

TEST(ConfigDiff, TheSameConfigChangesNothing) {
  const auto d = diff_configs(base(), base());
  EXPECT_TRUE(d.ok());
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.unchanged.size(), 3u);
}

TEST(ConfigDiff, JobsAreMatchedByIdWhateverTheirOrder) {
  auto next = base();
  std::reverse(next.jobs.begin(), next.jobs.end());
  next.jobs.erase(next.jobs.begin() + 1);     // job 2 removed
  next.jobs.push_back(job(9, "z", 40900));   // job 9 added
  next.jobs[0].rate_limit_pps = 1000;         // job 3 changed in place
  const auto d = diff_configs(base(), next);
  ASSERT_TRUE(d.ok()) << d.refused.front();
  EXPECT_EQ(d.added, std::vector<uint32_t>{9});
  EXPECT_EQ(d.removed, std::vector<uint32_t>{2});
  EXPECT_EQ(d.changed, std::vector<uint32_t>{3});
  EXPECT_EQ(d.unchanged, std::vector<uint32_t>{1});
  EXPECT_EQ(d.describe(next), "added 1 (z), changed 1 (c), removed 1, unchanged 1");
}

TEST(ConfigDiff, LimitsSecretsSourcesAndNamesChangeInPlace) {
  auto next = base();
  next.jobs[0].secret = "a-new-secret-of-16+";
  next.jobs[0].quota_bytes = 2 << 20;
  next.jobs[1].allowed_sources = {{0xc6120000, 24}};
  next.jobs[1].worker_ipv4 = {1, 2, 3, 4};
  next.jobs[2].name = "c-renamed";
  next.jobs[2].nonfinite = config::Nonfinite::refuse;
  next.timeouts.round_stall_ms = 5;
  next.limits.memory_bytes = 1ull << 31;
  const auto d = diff_configs(base(), next);
  ASSERT_TRUE(d.ok()) << d.refused.front();
  EXPECT_TRUE(has(d.changed, 1) && has(d.changed, 2) && has(d.changed, 3));
  EXPECT_TRUE(d.settings_changed);
}

TEST(ConfigDiff, CheckpointSettingsChangeInPlace) {
  auto running = base();
  running.jobs[1].mode = config::JobMode::ps;
  auto next = running;
  next.checkpoints.dir = "/var/lib/phub";
  next.jobs[1].checkpoint = {"/var/lib/phub", 100, 60, 5};
  const auto d = diff_configs(running, next);
  ASSERT_TRUE(d.ok()) << d.refused.front();
  EXPECT_EQ(d.changed, std::vector<uint32_t>{2});
  EXPECT_TRUE(d.settings_changed);
  auto again = next;
  again.jobs[1].checkpoint.every_rounds = 0;
  again.jobs[1].checkpoint.keep = 1;
  const auto d2 = diff_configs(next, again);
  ASSERT_TRUE(d2.ok()) << d2.refused.front();
  EXPECT_EQ(d2.changed, std::vector<uint32_t>{2});
  EXPECT_FALSE(d2.settings_changed);
}

TEST(ConfigDiff, ArpIcmpLimitsChangeInPlaceUdpChecksumNeedsARestart) {
  auto next = base();
  next.limits.arp_icmp_per_s = 10;
  next.limits.arp_icmp_burst = 3;
  auto d = diff_configs(base(), next);
  ASSERT_TRUE(d.ok()) << d.refused.front();
  EXPECT_TRUE(d.settings_changed);
  EXPECT_TRUE(d.changed.empty());
  next = base();
  next.ports[0].udp_checksum = config::UdpChecksum::trust;
  d = diff_configs(base(), next);
  ASSERT_EQ(d.refused.size(), 1u);
  EXPECT_NE(d.refused[0].find("udp_checksum"), std::string::npos) << d.refused[0];
}

// The control thread reads both intervals from the running config; the endpoint is bound once, at start.
TEST(ConfigDiff, ControlIntervalsChangeInPlaceTheEndpointsNeedARestart) {
  for (uint32_t config::Control::*interval : {&config::Control::stats_interval_ms, &config::Control::metrics_interval_ms}) {
    auto next = base();
    next.control.*interval = 50;
    const auto d = diff_configs(base(), next);
    EXPECT_TRUE(d.ok() && d.settings_changed && d.changed.empty());
  }
  auto moved = base();
  moved.control.metrics_address = "127.0.0.1:19464";
  moved.control.socket_path = "/run/phub/other.sock";
  EXPECT_EQ(diff_configs(base(), moved).refused,
            (std::vector<std::string>{"control.socket_path: changing the control socket needs a restart",
                                      "control.metrics_address: changing the Prometheus endpoint needs a restart"}));
}

TEST(ConfigDiff, WhatNeedsARestartIsRefusedFieldByField) {
  auto next = base();
  next.jobs[1].workers = 8;
  next.jobs[1].keys.push_back({"extra", 5});
  next.jobs[2].dtype = Dtype::bf16;
  next.jobs[2].mode = config::JobMode::ps;
  next.lcores.push_back({3, {}});
  next.ports[0].mtu = 9000;
  next.limits.ring_entries = 8192;
  const auto d = diff_configs(base(), next);
  ASSERT_FALSE(d.ok());
  auto said = [&](const std::string& text) {
    return std::any_of(d.refused.begin(), d.refused.end(), [&](const std::string& r) { return r == text; });
  };
  EXPECT_TRUE(said("jobs[2].workers: changing workers needs a restart"));
  EXPECT_TRUE(said("jobs[2].keys: changing keys needs a restart"));
  EXPECT_TRUE(said("jobs[3].dtype: changing the dtype needs a restart"));
  EXPECT_TRUE(said("jobs[3].mode: changing the mode needs a restart"));
  EXPECT_TRUE(said("lcores: changing lcores needs a restart"));
  EXPECT_TRUE(said("ports: changing ports (devices, addresses, MTU, queues, steering, udp_checksum) needs a restart"));
  EXPECT_TRUE(said("limits.ring_entries: changing the hand-off rings needs a restart"));
  EXPECT_EQ(d.refused.size(), 7u);
}

// Running workers speak session packets from their join on, or do not: neither switch changes in place.
TEST(ConfigDiff, SessionsAndPayloadMacNeedARestart) {
  auto next = base();
  next.jobs[0].secret = "a-secret-0123456789";
  next.jobs[0].sessions = true;
  next.jobs[0].payload_mac = true;
  auto was = base();
  was.jobs[0].secret = next.jobs[0].secret;
  const auto d = diff_configs(was, next);
  ASSERT_EQ(d.refused.size(), 2u);
  EXPECT_EQ(d.refused[0], "jobs[1].sessions: changing sessions needs a restart");
  EXPECT_EQ(d.refused[1], "jobs[1].payload_mac: changing payload_mac needs a restart");
}

}  // namespace
}  // namespace phub::engine
