// Every validation rule rejects a bad value with a message naming the field path, the value and the rule.
#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

struct Case {
  const char* patch;     // Lua statements applied to kBase's cfg
  const char* fragment;  // must appear in the error
  bool racks = false;    // apply kRacks first
};

// Racks for the hierarchy rules: this server (p0, 198.18.0.1) is the hub of r1.
constexpr const char* kRacks =
    "cfg.racks = { { name = 'r1', hub_ipv4 = '198.18.0.1' }, { name = 'r2', hub_ipv4 = '198.18.9.1' } }\n"
    "cfg.rack = 'r1'\n"
    "cfg.jobs[1].ranks_by_rack = { r1 = { 0, 1 }, r2 = { 2, 3 } }\n"
    "cfg.jobs[2].ranks_by_rack = { r1 = { 0 }, r2 = { 1 } }\n";

const Case kCases[] = {
    // types
    {"cfg.jobs[1].mode = 3", "jobs[1].mode: expected string, got number (3)"},
    {"cfg.jobs[1].secret = 42", "jobs[1].secret: expected string, got number"},
    {"cfg.jobs[1].deterministic = 'yes'", "jobs[1].deterministic: expected boolean, got string"},
    {"cfg.eal_args = { '--no-huge', 5 }", "eal_args[2]: expected string, got number"},
    {"cfg.jobs = 5", "jobs: expected a list (table), got number"},
    {"cfg.jobs[1].keys[1] = 7", "jobs[1].keys[1]: expected table {name = ..., elems = ...}, got number"},
    // required, unknown and list shape
    {"cfg.ports[1].device = nil", "ports[1].device: missing (required)"},
    {"cfg.lcores = nil", "lcores: missing (required)"},
    {"cfg.ports = {}", "ports: empty (at least one is required)"},
    {"cfg.jobs[1].frobnicate = 1", "jobs[1].frobnicate: unknown key"},
    {"cfg.frobnicate = 1", "frobnicate: unknown key"},
    {"cfg.ports[1].frob = 1", "ports[1].frob: unknown key"},
    {"cfg.limits = { frob = 1 }", "limits.frob: unknown key"},
    {"cfg.jobs[2].optimizer = { frob = 1 }", "jobs[2].optimizer.frob: unknown key"},
    {"cfg[1] = 5", "[1]: unexpected number key"},
    {"cfg.jobs[1].keys.extra = 1", "jobs[1].keys.extra: unknown key (jobs[1].keys is a list)"},
    {"cfg.jobs[1].keys[3] = { name = 'x', elems = 1 }", "jobs[1].keys[2]: missing: a list has no holes"},
    // integers and ranges
    {"cfg.jobs[2].workers = 0", "jobs[2].workers: 0 is not in 1..1024"},
    {"cfg.jobs[1].workers = 1025", "jobs[1].workers: 1025 is not in 1..1024"},
    {"cfg.jobs[1].workers = 2.5", "jobs[1].workers: 2.5 is not an integer"},
    {"cfg.jobs[1].workers = 1e300", "jobs[1].workers: 1e+300 is not in 1..1024"},
    {"cfg.jobs[1].id = 2^40", "jobs[1].id: 1099511627776.0 is not in 1..4294967295"},
    {"cfg.lcores[1].id = 0", "lcores[1].id: 0 is not in 1..127"},
    {"cfg.ports[1].mtu = 100", "ports[1].mtu: 100 is not in 576..9000"},
    {"cfg.timeouts = { round_stall_ms = 0 }", "timeouts.round_stall_ms: 0 is not in 1..3600000"},
    {"cfg.polling = { idle_sleep_us = 200000 }", "polling.idle_sleep_us: 200000 is not in 0..100000"},
    {"cfg.jobs[1].keys[1].elems = 0", "jobs[1].keys[1].elems: 0 is not in 1..2147483648"},
    {"cfg.jobs[1].keys = {}", "jobs[1].keys: 0 keys is not 1..1048576"},
    {"cfg.jobs[1].port_base = 0", "jobs[1].port_base: 0 is not in 1..65535"},
    {"cfg.jobs[1].port_base = 65535", "jobs[1].port_base: 65535: ports 65535..65536 (one per lcore)"},
    // sizes
    {"cfg.jobs[1].chunk_bytes = 1000", "jobs[1].chunk_bytes: 1000 is not in 1KiB..1MiB"},
    {"cfg.jobs[1].chunk_bytes = '2MiB'", "jobs[1].chunk_bytes: \"2MiB\" is not in 1KiB..1MiB"},
    {"cfg.jobs[1].chunk_bytes = 1100", "jobs[1].chunk_bytes: 1100 is not a multiple of 64"},
    {"cfg.jobs[1].quota_bytes = 0", "jobs[1].quota_bytes: 0 is not in 1B..1024TiB"},
    {"cfg.jobs[1].quota_bytes = '12XB'", "jobs[1].quota_bytes: \"12XB\" is not a size"},
    {"cfg.jobs[1].quota_bytes = -5", "jobs[1].quota_bytes: -5 is not a size"},
    {"cfg.jobs[1].quota_bytes = '2GiB'", "jobs[1].quota_bytes: 2GiB is not in 1B..limits.memory_bytes (1GiB)"},
    {"cfg.limits = { memory_bytes = 0 }", "limits.memory_bytes: 0 is not in 1MiB..1024TiB"},
    // words
    {"cfg.jobs[1].mode = 'allreduc'", "jobs[1].mode: \"allreduc\" is not one of \"allreduce\", \"ps\""},
    {"cfg.jobs[1].reduce = 'max'", "jobs[1].reduce: \"max\" is not one of \"sum\", \"mean\""},
    {"cfg.jobs[1].dtype = 'fp64'", "jobs[1].dtype: \"fp64\" is not one of \"fp32\", \"fp16\", \"bf16\""},
    {"cfg.ports[1].steering = 'rss'", "ports[1].steering: \"rss\" is not one of \"auto\", \"flow\", \"ring\""},
    {"cfg.ports[1].udp_checksum = 'off'", "ports[1].udp_checksum: \"off\" is not one of \"verify\", \"trust\""},
    {"cfg.jobs[2].optimizer = { kind = 'lamb' }", "jobs[2].optimizer.kind: \"lamb\" is not one of \"sgd\""},
    {"cfg.jobs[1].name = 'bad name'", "jobs[1].name: \"bad name\" is not a name"},
    // floats
    {"cfg.jobs[2].optimizer = { lr = 0 }", "jobs[2].optimizer.lr: 0 is not > 0"},
    {"cfg.jobs[2].optimizer = { beta1 = 1 }", "jobs[2].optimizer.beta1: 1 is not in [0, 1)"},
    {"cfg.jobs[2].optimizer = { momentum = 1.5 }", "jobs[2].optimizer.momentum: 1.5 is not in [0, 1]"},
    {"cfg.jobs[2].optimizer = { eps = 0/0 }", "jobs[2].optimizer.eps: "},
    {"cfg.jobs[2].optimizer = { lr = 1e-50 }", "jobs[2].optimizer.lr: 1e-50 is not > 0 once rounded to a 32-bit float"},
    {"cfg.jobs[2].optimizer = { lr = 1e39 }", "jobs[2].optimizer.lr: 1e+39 is out of the range of a 32-bit float"},
    {"cfg.jobs[2].optimizer = { weight_decay = -1 }", "jobs[2].optimizer.weight_decay: -1 is not >= 0"},
    // addresses
    {"cfg.ports[1].ipv4 = '10.0.0.300/24'", "ports[1].ipv4: \"10.0.0.300/24\" is not an IPv4 address with prefix"},
    {"cfg.ports[1].ipv4 = '198.18.0.1'", "ports[1].ipv4: \"198.18.0.1\" is not an IPv4 address with prefix"},
    {"cfg.ports[1].ipv4 = '198.18.0.0/24'", "ports[1].ipv4: \"198.18.0.0/24\" is not a unicast host address"},
    {"cfg.ports[1].mac = 'aa:bb:cc:dd:ee'", "ports[1].mac: \"aa:bb:cc:dd:ee\" is not a MAC address"},
    {"cfg.jobs[1].allowed_sources = { '198.18.0.5/24' }",
     "jobs[1].allowed_sources[1]: \"198.18.0.5/24\" has host bits set (did you mean \"198.18.0.0/24\"?)"},
    {"cfg.jobs[1].workers = { '198.18.0.2', 'bad' }", "jobs[1].workers[2]: \"bad\" is not an IPv4 address"},
    {"cfg.racks = { { name = 'r', hub_ipv4 = '198.18.0.1/24' } }", "racks[1].hub_ipv4: \"198.18.0.1/24\" is not an"},
    // uniqueness and references
    {"cfg.lcores[2].id = 1", "lcores[2].id: 1 is used twice (lcores[1])"},
    {"cfg.ports[2] = { name = 'p0', device = 'net_ring1', ipv4 = '198.18.1.1/24' }",
     "ports[2].name: \"p0\" is used twice (ports[1])"},
    {"cfg.ports[2] = { name = 'p1', device = 'net_ring1', ipv4 = '198.18.0.1/24' }",
     "ports[2].ipv4: 198.18.0.1 is used twice (ports[1])"},
    {"cfg.jobs[2].id = 1", "jobs[2].id: 1 is used twice (jobs[1])"},
    {"cfg.jobs[2].name = 'a'", "jobs[2].name: \"a\" is used twice (jobs[1])"},
    {"cfg.jobs[1].keys[2] = { name = 'w', elems = 1 }", "jobs[1].keys[2].name: \"w\" is used twice (jobs[1].keys[1])"},
    {"cfg.lcores[1].ports = { 'p9' }", "lcores[1].ports[1]: \"p9\" is not a port name"},
    {"cfg.lcores[1].ports = { 'p0', 'p0' }", "lcores[1].ports[2]: \"p0\" is listed twice"},
    {"cfg.lcores[1].cross_socket = 1", "lcores[1].cross_socket: expected boolean, got number"},
    {"cfg.ports[2] = { name = 'p1', device = 'net_ring1', ipv4 = '198.18.1.1/24' }\n"
     "cfg.lcores[1].ports = { 'p0' }; cfg.lcores[2].ports = { 'p0' }",
     "ports[2]: no lcore polls it"},
    {"cfg.ports[1].device = 'net_af_packet0,iface=veth0'",
     "ports[1].device: net_af_packet has qpairs=1 queue pairs, but each of the 2 lcores transmits on every port"},
    {"cfg.ports[1].device = 'net_af_packet0,iface=veth0,qpairs=1,framecnt=4096'",
     "ports[1].device: net_af_packet has qpairs=1 queue pairs, but each of the 2 lcores transmits on every port on a "
     "queue of its own: set qpairs=2"},
    {"cfg.jobs[2].port_base = 40001", "jobs[2].port_base: ports 40001..40002 overlap jobs[1] (40000..40001)"},
    {"cfg.limits = { max_jobs = 1 }", "jobs: 2 jobs exceed limits.max_jobs (1)"},
    // modes and cross-field rules
    {"cfg.jobs[1].optimizer = { kind = 'sgd' }", "jobs[1].optimizer: only allowed in ps mode"},
    {"cfg.polling = { idle_polls_before_sleep = 10 }",
     "polling: idle_polls_before_sleep and idle_sleep_us must both be 0 (busy-poll) or both be > 0"},
    {"cfg.limits = { ring_entries = 1000 }", "limits.ring_entries: 1000 is not a power of two"},
    {"cfg.limits = { arp_icmp_burst = 0 }", "limits.arp_icmp_burst: 0 is not in 1..1000000"},
    {"cfg.limits = { arp_icmp_per_s = 2000000 }", "limits.arp_icmp_per_s: 2000000 is not in 0..1000000"},
    {"cfg.control = { socket_path = string.rep('x', 200) }", "control.socket_path: \"xxxx"},
    {"cfg.jobs[1].round_modulus = 3", "jobs[1].round_modulus: 3 must be 0 or at least 4"},
    {"cfg.jobs[1].answer_bytes_per_s = -1", "jobs[1].answer_bytes_per_s: -1 is not in 0..1000000000000"},
    {"cfg.jobs[1].secret = string.rep('s', 2000)", "jobs[1].secret: a secret of 2000 bytes is longer than 1024"},
    // secrets: none, or one under 16 bytes, only with insecure = true
    {"cfg.jobs[1].secret = nil", "jobs[1].secret: missing: a job without a secret must say insecure = true"},
    {"cfg.jobs[1].secret = ''", "jobs[1].secret: missing: a job without a secret must say insecure = true"},
    {"cfg.jobs[1].secret = '0123456789abcde'",
     "jobs[1].secret: a secret of 15 bytes is shorter than 16 (or say insecure = true)"},
    {"cfg.jobs[2].insecure = false", "jobs[2].secret: missing: a job without a secret must say insecure = true"},
    {"cfg.jobs[2].insecure = 'yes'", "jobs[2].insecure: expected boolean, got string"},
    // sessions need a secret, payload MACs need sessions
    {"cfg.jobs[2].sessions = true", "jobs[2].sessions: needs a secret"},
    {"cfg.jobs[1].sessions = false; cfg.jobs[1].insecure = true; cfg.jobs[1].payload_mac = true",
     "jobs[1].payload_mac: needs sessions = true"},
    {"cfg.jobs[2].payload_mac = true", "jobs[2].payload_mac: needs sessions = true"},
    // a job with a secret runs sessions unless it says insecure = true
    {"cfg.jobs[1].sessions = false", "jobs[1].sessions: false with a secret: recorded packets then replay"},
    {"cfg.jobs[1].sessions = 1", "jobs[1].sessions: expected boolean, got number"},
    // checkpoints
    {"cfg.jobs[1].checkpoint = { dir = '/tmp' }", "jobs[1].checkpoint: only allowed in ps mode"},
    {"cfg.jobs[2].checkpoint = { dir = 'ckpt' }", "jobs[2].checkpoint.dir: \"ckpt\" is not an absolute path"},
    {"cfg.checkpoints = { dir = 5 }", "checkpoints.dir: expected string, got number"},
    {"cfg.jobs[2].checkpoint = { dir = '/tmp', keep = 0 }", "jobs[2].checkpoint.keep: 0 is not in 1..1000"},
    {"cfg.checkpoints = { every_s = 7 * 86400 + 1 }", "checkpoints.every_s: 604801 is not in 0..604800"},
    {"cfg.jobs[2].checkpoint = { dir = '/tmp', every_rounds = -1 }",
     "jobs[2].checkpoint.every_rounds: -1 is not in 0..4294967295"},
    {"cfg.jobs[2].checkpoint = { dir = '/tmp', frob = 1 }", "jobs[2].checkpoint.frob: unknown key"},
    {"cfg.jobs[2].checkpoint = 5", "jobs[2].checkpoint: expected table, got number"},
    {"cfg.checkpoints = { every_rounds = 10 }",
     "checkpoints: every_rounds or every_s is set but dir is empty (no directory to write to)"},
    {"cfg.jobs[2].checkpoint = { every_s = 10 }",
     "jobs[2].checkpoint: every_rounds or every_s is set but dir is empty (no directory to write to)"},
    {"cfg.checkpoints = { dir = '/tmp' }; cfg.jobs[2].name = 'b:1'",
     "jobs[2].name: \"b:1\" cannot name a checkpoint file (1..64 characters of A-Z a-z 0-9 _ . -) and checkpoint.dir"},
    {"cfg.jobs[2].checkpoint = { dir = '/tmp' }; cfg.jobs[2].id = 70000",
     "jobs[2].id: 70000 is above 65535, the largest job id a checkpoint file holds"},
    // racks
    {"cfg.racks = { { name = 'r1', hub_ipv4 = '198.18.0.1' } }", "rack: missing (required when racks are set"},
    {"cfg.rack = 'r1'", "rack: \"r1\" is set but there are no racks"},
    {"cfg.jobs[1].ranks_by_rack = { r1 = { 0 } }", "jobs[1].ranks_by_rack: set but there are no racks"},
    {"cfg.racks = { { name = 'r1', hub_ipv4 = '198.18.0.1' }, { name = 'r1', hub_ipv4 = '198.18.0.2' } }",
     "racks[2].name: \"r1\" is used twice (racks[1])"},
    {"cfg.rack = 'zz'", "rack: \"zz\" is not one of racks[].name", true},
    // a rack's hosts are the probe's plan (racks.lua's hosts_by_rack), not a config field: nothing would read them
    {"cfg.racks[1].hosts = { 'vm-a0' }", "racks[1].hosts: unknown key", true},
    {"cfg.racks[1].hub_ipv4 = '198.18.5.5'",
     "racks[1].hub_ipv4: 198.18.5.5 is this server's rack hub but no port has that address", true},
    {"cfg.jobs[1].ranks_by_rack.zz = {}", "jobs[1].ranks_by_rack.zz: no such rack", true},
    {"cfg.jobs[1].ranks_by_rack.r2 = { 0, 2, 3 }", "jobs[1].ranks_by_rack.r2[1]: rank 0 is also in \"r1\"", true},
    {"cfg.jobs[1].ranks_by_rack.r2 = { 2, 4 }", "jobs[1].ranks_by_rack.r2[2]: 4 is not in 0..3 (workers is 4)", true},
    {"cfg.jobs[1].ranks_by_rack.r2 = { 2 }", "jobs[1].ranks_by_rack: rank 3 is in no rack", true},
    {"cfg.jobs[2].ranks_by_rack = nil", "jobs[2].ranks_by_rack: missing (required when racks are set)", true},
};

class Rule : public ::testing::TestWithParam<Case> {};

TEST_P(Rule, RejectedWithFieldPathValueAndRule) {
  const Case& c = GetParam();
  std::string patch = (c.racks ? std::string(kRacks) : std::string()) + c.patch;
  std::string error = load_error(patched(patch));
  EXPECT_NE(error.find(std::string("test.lua: ") + c.fragment), std::string::npos)
      << "patch: " << patch << "\nerror: " << error;
}

INSTANTIATE_TEST_SUITE_P(All, Rule, ::testing::ValuesIn(kCases));

TEST(Rule, BaseAndRackedBaseAreValid) {
  auto base = load_string(patched(""), "base.lua");
  ASSERT_TRUE(base.has_value()) << base.error();
  auto racked = load_string(patched(kRacks), "racked.lua");
  ASSERT_TRUE(racked.has_value()) << racked.error();
}

TEST(Rule, SixteenByteSecretsAndInsecureJobsAreAccepted) {
  for (const char* patch : {"cfg.jobs[1].secret = '0123456789abcdef'",
                            "cfg.jobs[1].secret = 'short'; cfg.jobs[1].insecure = true",
                            "cfg.jobs[1].secret = nil; cfg.jobs[1].insecure = true"}) {
    auto c = load_string(patched(patch), "test.lua");
    ASSERT_TRUE(c.has_value()) << patch << ": " << c.error();
    EXPECT_EQ(c->jobs[0].insecure, std::string_view(patch).find("insecure") != std::string_view::npos) << patch;
  }
}

TEST(Rule, SessionsAreOnForJobsWithASecretAndPayloadMacIsOptIn) {
  auto plain = load_string(patched(""), "test.lua");
  ASSERT_TRUE(plain.has_value()) << plain.error();
  EXPECT_TRUE(plain->jobs[0].sessions);    // a secret
  EXPECT_FALSE(plain->jobs[1].sessions);   // none (insecure)
  EXPECT_FALSE(plain->jobs[0].payload_mac);
  auto off = load_string(patched("cfg.jobs[1].sessions = false; cfg.jobs[1].insecure = true"), "test.lua");
  ASSERT_TRUE(off.has_value()) << off.error();
  EXPECT_FALSE(off->jobs[0].sessions);
  EXPECT_FALSE(off->jobs[0].payload_mac);
  auto m = load_string(patched("cfg.jobs[1].payload_mac = true"), "test.lua");
  ASSERT_TRUE(m.has_value()) << m.error();
  EXPECT_TRUE(m->jobs[0].sessions);
  EXPECT_TRUE(m->jobs[0].payload_mac);
  auto short_secret = load_string(patched("cfg.jobs[1].secret = 'short'; cfg.jobs[1].insecure = true"), "test.lua");
  ASSERT_TRUE(short_secret.has_value()) << short_secret.error();
  EXPECT_TRUE(short_secret->jobs[0].sessions);  // a short secret still keys sessions
}

TEST(Rule, ManyErrorsAreReportedTogetherAndCut) {
  std::string error = load_error(patched("for i = 1, 30 do cfg['unknown' .. i] = i end"));
  EXPECT_NE(error.find("unknown1: unknown key"), std::string::npos);
  EXPECT_NE(error.find("... and 10 more errors"), std::string::npos) << error;
}

TEST(Rule, ValidateCatchesProgrammaticMistakes) {
  auto cfg = load_string(patched(""), "base.lua");
  ASSERT_TRUE(cfg.has_value());
  Config c = *cfg;
  c.jobs[0].optimizer.lr = 0.5f;  // an optimizer on an allreduce job
  c.lcores[1].id = c.lcores[0].id;
  auto v = validate(c);
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.error().find("jobs[1].optimizer: only allowed in ps mode"), std::string::npos) << v.error();
  EXPECT_NE(v.error().find("lcores[2].id: 1 is used twice (lcores[1])"), std::string::npos) << v.error();
}

}  // namespace
}  // namespace phub::config::test
