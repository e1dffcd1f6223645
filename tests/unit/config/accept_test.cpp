// What valid configs turn into: defaults, sizes with units, alternative forms, orderings.
#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

constexpr std::string_view kMinimal = R"lua(
return {
  ports = { { name = "p0", device = "net_ring0", ipv4 = "198.18.0.1/24" } },
  lcores = { { id = 1 } },
  jobs = { { id = 9, name = "j", workers = 3, port_base = 5000, secret = "0123456789abcdef",
             keys = { { name = "k", elems = 10 } } } },
}
)lua";

Config must_load(std::string_view text) {
  auto cfg = load_string(text, "test.lua");
  EXPECT_TRUE(cfg.has_value()) << (cfg.has_value() ? "" : cfg.error());
  return cfg.has_value() ? *cfg : Config{};
}

TEST(Accept, DefaultsAreThoseOfTheStructs) {
  Config c = must_load(kMinimal);
  EXPECT_TRUE(c.eal_args.empty());
  EXPECT_EQ(c.polling, Polling{});
  EXPECT_EQ(c.timeouts, Timeouts{});
  EXPECT_EQ(c.limits, Limits{});
  EXPECT_EQ(c.control, Control{});
  EXPECT_TRUE(c.racks.empty());
  EXPECT_TRUE(c.rack.empty());
  ASSERT_EQ(c.ports.size(), 1u);
  Port want_port;
  want_port.name = "p0";
  want_port.device = "net_ring0";
  want_port.ipv4 = {(198u << 24) | (18u << 16) | 1u, 24};
  EXPECT_EQ(c.ports[0], want_port);
  ASSERT_EQ(c.lcores.size(), 1u);
  EXPECT_EQ(c.lcores[0].id, 1u);
  EXPECT_TRUE(c.lcores[0].ports.empty());
  EXPECT_FALSE(c.lcores[0].cross_socket);
  ASSERT_EQ(c.jobs.size(), 1u);
  Job want_job;
  want_job.id = 9;
  want_job.name = "j";
  want_job.workers = 3;
  want_job.port_base = 5000;
  want_job.secret = "0123456789abcdef";
  want_job.keys = {{"k", 10}};
  want_job.quota_bytes = Limits{}.memory_bytes;  // the loader defaults that are not the struct's:
  want_job.sessions = true;                      // the job has a secret
  EXPECT_EQ(c.jobs[0], want_job);
}

TEST(Accept, CheckpointsAreServerDefaultsWithPerJobOverrides) {
  Config c = must_load(patched(
      "cfg.checkpoints = { dir = '/var/lib/phub', every_rounds = 500, keep = 4 }\n"
      "cfg.jobs[3] = { id = 3, name = 'c', mode = 'ps', workers = 1, port_base = 40020, insecure = true,\n"
      "                keys = { { name = 'w', elems = 8 } }, checkpoint = { every_s = 30, keep = 2 } }"));
  EXPECT_EQ(c.checkpoints, (Checkpoints{"/var/lib/phub", 500, 0, 4}));
  EXPECT_EQ(c.jobs[0].checkpoint, Checkpoints{});  // allreduce: no checkpoint
  EXPECT_EQ(c.jobs[1].checkpoint, (Checkpoints{"/var/lib/phub", 500, 0, 4}));
  EXPECT_EQ(c.jobs[2].checkpoint, (Checkpoints{"/var/lib/phub", 500, 30, 2}));
  // A dump loads back to the same config.
  Config again = must_load(dump_lua(c));
  EXPECT_EQ(again, c);
  EXPECT_NE(describe(c).find("checkpoints in /var/lib/phub every 500 rounds every 30 s (keep 2)"), std::string::npos);
}

TEST(Accept, SizesTakeUnits) {
  Config c = must_load(patched(
      "cfg.limits = { memory_bytes = '2GiB' }\n"
      "cfg.jobs[1].quota_bytes = '1GB'; cfg.jobs[1].chunk_bytes = '64KiB'\n"
      "cfg.jobs[2].quota_bytes = '512 MiB'; cfg.jobs[2].chunk_bytes = 2^12"));
  EXPECT_EQ(c.limits.memory_bytes, 2ull * 1024 * 1024 * 1024);
  EXPECT_EQ(c.jobs[0].quota_bytes, 1000ull * 1000 * 1000);
  EXPECT_EQ(c.jobs[0].chunk_bytes, 64u * 1024);
  EXPECT_EQ(c.jobs[1].quota_bytes, 512ull * 1024 * 1024);
  EXPECT_EQ(c.jobs[1].chunk_bytes, 4096u);
}

TEST(Accept, QuotaDefaultsToTheMemoryLimit) {
  Config c = must_load(patched("cfg.limits = { memory_bytes = '3GiB' }"));
  EXPECT_EQ(c.jobs[0].quota_bytes, c.limits.memory_bytes);
  EXPECT_EQ(c.jobs[0].quota_bytes, 3ull << 30);
}

TEST(Accept, WorkersAsAnAddressList) {
  Config c = must_load(patched("cfg.jobs[1].workers = { '198.18.0.2', '198.18.0.3', '198.18.0.2' }"));
  EXPECT_EQ(c.jobs[0].workers, 3);
  ASSERT_EQ(c.jobs[0].worker_ipv4.size(), 3u);
  EXPECT_EQ(c.jobs[0].worker_ipv4[1], (198u << 24) | (18u << 16) | 3u);
  EXPECT_TRUE(c.jobs[1].worker_ipv4.empty());
}

TEST(Accept, EalArgsAsOneStringAreSplitOnWhitespace) {
  Config c = must_load(patched("cfg.eal_args = '  --no-huge  -m 512\\t--lcores (0-2)@(0,1) '"));
  std::vector<std::string> want{"--no-huge", "-m", "512", "--lcores", "(0-2)@(0,1)"};
  EXPECT_EQ(c.eal_args, want);
  Config l = must_load(patched("cfg.eal_args = { '--no-huge', '-m', '512', '--lcores', '(0-2)@(0,1)' }"));
  EXPECT_EQ(l.eal_args, want);
}

TEST(Accept, IntegralFloatsAreIntegers) {
  Config c = must_load(patched("cfg.jobs[1].workers = 2^2; cfg.jobs[1].keys[1].elems = 2^20"));
  EXPECT_EQ(c.jobs[0].workers, 4);
  EXPECT_EQ(c.jobs[0].keys[0].elems, 1u << 20);
}

TEST(Accept, RanksByRackFollowTheOrderOfRacks) {
  Config c = must_load(patched(
      "cfg.racks = { { name = 'zeta', hub_ipv4 = '198.18.0.1' }, { name = 'alpha', hub_ipv4 = '198.18.7.1' } }\n"
      "cfg.rack = 'zeta'\n"
      "cfg.jobs[1].ranks_by_rack = { alpha = { 3, 1 }, zeta = { 0, 2 } }\n"
      "cfg.jobs[2].ranks_by_rack = { alpha = { 0, 1 } }"));
  ASSERT_EQ(c.jobs[0].ranks_by_rack.size(), 2u);
  EXPECT_EQ(c.jobs[0].ranks_by_rack[0].first, "zeta");
  EXPECT_EQ(c.jobs[0].ranks_by_rack[0].second, (std::vector<uint16_t>{0, 2}));
  EXPECT_EQ(c.jobs[0].ranks_by_rack[1].first, "alpha");
  EXPECT_EQ(c.jobs[0].ranks_by_rack[1].second, (std::vector<uint16_t>{3, 1}));
  EXPECT_EQ(c.racks[1].hub_ipv4, (198u << 24) | (18u << 16) | (7u << 8) | 1u);
}

TEST(Accept, OptimizerAndEnumsAreRead) {
  Config c = must_load(patched(
      "cfg.jobs[2].optimizer = { kind = 'adam', lr = 0.001, beta2 = 0.98, adamw = true, weight_decay = 0.1 }\n"
      "cfg.jobs[2].dtype = 'bf16'; cfg.jobs[1].reduce = 'mean'; cfg.jobs[1].deterministic = true\n"
      "cfg.ports[1].steering = 'ring'; cfg.ports[1].mac = '02:AB:cd:00:00:01'"));
  const Optimizer& o = c.jobs[1].optimizer;
  EXPECT_EQ(o.kind, OptimizerKind::adam);
  EXPECT_FLOAT_EQ(o.lr, 0.001f);
  EXPECT_FLOAT_EQ(o.beta2, 0.98f);
  EXPECT_FLOAT_EQ(o.beta1, Optimizer{}.beta1);
  EXPECT_TRUE(o.adamw);
  EXPECT_EQ(c.jobs[1].dtype, Dtype::bf16);
  EXPECT_EQ(c.jobs[0].reduce, Reduce::mean);
  EXPECT_TRUE(c.jobs[0].deterministic);
  EXPECT_EQ(c.ports[0].steering, Steering::ring);
  ASSERT_TRUE(c.ports[0].mac.has_value());
  EXPECT_EQ(*c.ports[0].mac, (MacAddr{0x02, 0xab, 0xcd, 0x00, 0x00, 0x01}));
}

TEST(Accept, DumpRoundTripsEveryField) {
  Config c = must_load(patched(
      "cfg.eal_args = { 'a b', 'quote\"and\\\\back', '\\1\\255' }\n"
      "cfg.ports[1].mac = '02:00:00:00:00:01'; cfg.ports[1].mtu = 9000\n"
      "cfg.jobs[1].secret = 'se\\0cret\\n-0123456'; cfg.jobs[1].allowed_sources = { '198.18.0.0/15', '198.18.0.9' }\n"
      "cfg.jobs[1].rate_limit_pps = 123456; cfg.jobs[1].round_modulus = 1000\n"
      "cfg.jobs[1].answer_bytes_per_s = 2500000\n"
      "cfg.jobs[2].optimizer = { kind = 'nesterov', lr = 0.1, momentum = 0.95 }\n"
      "cfg.jobs[2].workers = { '198.18.0.2', '198.18.0.3' }\n"
      "cfg.polling = { idle_polls_before_sleep = 7, idle_sleep_us = 3 }\n"
      "cfg.control = { socket_path = '/tmp/x.sock', stats_interval_ms = 5 }\n"
      "cfg.ports[1].udp_checksum = 'trust'; cfg.limits = { arp_icmp_per_s = 0, arp_icmp_burst = 7 }\n"
      "cfg.lcores[1].cross_socket = true"));
  EXPECT_EQ(c.ports[0].udp_checksum, UdpChecksum::trust);
  EXPECT_TRUE(c.lcores[0].cross_socket);
  EXPECT_EQ(c.limits.arp_icmp_per_s, 0u);
  EXPECT_EQ(c.limits.arp_icmp_burst, 7u);
  EXPECT_EQ(c.jobs[0].answer_bytes_per_s, 2'500'000u);
  std::string text = dump_lua(c);
  Config back = must_load(text);
  EXPECT_TRUE(back == c) << text;
}

}  // namespace
}  // namespace phub::config::test
