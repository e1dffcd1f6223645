// phub-probe output tests: hosts files, matrix files, report, hostfile, heatmap, and the Lua rack snippet
// loaded by the real config loader inside a minimal config.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "heatmap.hpp"
#include "hosts_file.hpp"
#include "matrix_io.hpp"
#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"
#include "report.hpp"
#include "synth.hpp"

namespace phub::probe {
namespace {

struct Fixture {
  topo::test::Synth s;
  topo::PlanOptions opts;
  topo::Plan plan;
  explicit Fixture(std::vector<size_t> sizes) : s(make(std::move(sizes))), plan(topo::plan(s.matrix, opts)) {}
  static topo::test::Synth make(std::vector<size_t> sizes) {
    topo::test::SynthOptions o;
    o.sizes = std::move(sizes);
    o.seed = 11;
    return topo::test::make_synth(o);
  }
  [[nodiscard]] PlanInputs inputs() const { return {s.matrix, plan, opts, {}}; }
};

TEST(HostsFile, ParsesNamesPortsAndComments) {
  auto h = parse_hosts("# job 7\nvm1 198.18.1.11:7701\n198.18.1.12   # default port\n\n");
  ASSERT_TRUE(h) << h.error();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].name, "vm1");
  EXPECT_EQ((*h)[0].port, 7701);
  EXPECT_EQ((*h)[1].name, "198.18.1.12");
  EXPECT_EQ((*h)[1].port, kDefaultPort);
}

TEST(HostsFile, RejectsBadInput) {
  EXPECT_FALSE(parse_hosts("a 198.18.1.1\na 198.18.1.2\n"));           // duplicate name
  EXPECT_FALSE(parse_hosts("198.18.1.1:7700\n198.18.1.1:7700\n"));     // duplicate endpoint
  EXPECT_FALSE(parse_hosts("198.18.1.1:0\n198.18.1.2\n"));             // bad port
  EXPECT_FALSE(parse_hosts("vm1 not-an-ip\n198.18.1.2\n"));            // not IPv4
  EXPECT_FALSE(parse_hosts("198.18.1.1\n"));                           // one host
  const auto err = parse_hosts("198.18.1.1\nx y z\n");
  ASSERT_FALSE(err);
  EXPECT_NE(err.error().find("line 2"), std::string::npos);
}

TEST(MatrixFile, NativeRoundTrip) {
  Fixture f({3, 4});
  topo::PairStats missing;
  f.s.matrix.set(0, 1, missing);
  auto back = parse_matrix(format_matrix(f.s.matrix));
  ASSERT_TRUE(back) << back.error();
  ASSERT_EQ(back->size(), f.s.matrix.size());
  for (size_t i = 0; i < back->size(); ++i)
    for (size_t j = 0; j < back->size(); ++j) {
      EXPECT_EQ(back->at(i, j).present, f.s.matrix.at(i, j).present);
      EXPECT_NEAR(back->at(i, j).median_us, f.s.matrix.at(i, j).median_us, 1e-3);
    }
  EXPECT_EQ(back->hosts()[2].addr, f.s.matrix.hosts()[2].addr);
}

TEST(MatrixFile, CsvWithMissingEntry) {
  auto m = parse_matrix("host,a,b,c\na,0,10,\nb,10,0,300\nc,,300,0\n");
  ASSERT_TRUE(m) << m.error();
  EXPECT_FALSE(m->at(0, 2).present);
  EXPECT_DOUBLE_EQ(m->at(1, 2).median_us, 300.0);
  EXPECT_FALSE(parse_matrix("host,a,b\na,0,x\nb,1,0\n"));
  EXPECT_FALSE(parse_matrix("something else\n"));
}

TEST(Outputs, HostfileAndRankEnvFollowTheRing) {
  Fixture f({4, 4, 4});
  const PlanInputs in = f.inputs();
  const std::string hostfile = openmpi_hostfile(in), env = rank_env(in, 29500);
  size_t at = 0;
  for (size_t r = 0; r < f.plan.ring.size(); ++r) {
    const std::string line = f.s.matrix.hosts()[f.plan.ring[r]].addr + " slots=1\n";
    const size_t pos = hostfile.find(line);
    ASSERT_NE(pos, std::string::npos);
    EXPECT_GE(pos, at);
    at = pos;
    EXPECT_NE(env.find(f.s.matrix.hosts()[f.plan.ring[r]].name + " RANK=" + std::to_string(r) + " WORLD_SIZE=12"),
              std::string::npos);
  }
  const std::string json = report_json(in);
  EXPECT_NE(json.find("\"groups\": 3"), std::string::npos);
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(std::count(json.begin(), json.end(), '['), std::count(json.begin(), json.end(), ']'));
}

TEST(Outputs, HeatmapShowsGroupBoundaries) {
  Fixture f({3, 5});
  const Image img = render_heatmap(f.s.matrix, f.plan);
  ASSERT_GT(img.width, 0u);
  ASSERT_EQ(img.rgb.size(), size_t{img.width} * img.height * 3);
  auto px = [&](unsigned x, unsigned y) { return &img.rgb[(size_t{y} * img.width + x) * 3]; };
  const unsigned cell = (img.width - 16) / 8;
  EXPECT_EQ(px(8 + cell / 2, 8 + cell / 2)[0], 0);  // diagonal cell is black
  const size_t first = f.plan.ring.front();
  const size_t boundary = static_cast<size_t>(f.plan.racks.members.front().size());
  EXPECT_EQ(f.plan.clustering.group[first], f.plan.clustering.group[f.plan.ring[boundary - 1]]);
  const unsigned line_x = static_cast<unsigned>(8 + boundary * cell - 1);
  EXPECT_EQ(px(line_x, 8 + cell / 2)[0], 255);  // white group boundary
  const std::string path = std::filesystem::temp_directory_path() / "phub_probe_heatmap_test.png";
  ASSERT_TRUE(write_png(path, img));
  std::ifstream png(path, std::ios::binary);
  char sig[8] = {};
  png.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG");
  std::filesystem::remove(path);
}

// The snippet, pasted unchanged above a minimal config's `return`, loads and validates.
TEST(Outputs, LuaSnippetAcceptedByConfigLoader) {
  Fixture f({4, 5, 3});
  const PlanInputs in = f.inputs();
  const std::string hub1 = f.s.matrix.hosts()[f.plan.racks.hub[0]].addr;
  const std::string text = lua_racks(in) +
                           "return {\n"
                           "  ports = { { name = \"p0\", device = \"net_null0\", ipv4 = \"" + hub1 + "/24\" } },\n"
                           "  lcores = { { id = 1 } },\n"
                           "  racks = phub_probe.racks,\n"
                           "  rack = \"rack1\",\n"
                           "  jobs = { { id = 1, name = \"j\", workers = 12, port_base = 40000,\n"
                           "             keys = { { name = \"w\", elems = 1024 } },\n"
                           "             ranks_by_rack = phub_probe.ranks_by_rack } },\n"
                           "}\n";
  auto cfg = config::load_string(text, "probe-snippet.lua");
  ASSERT_TRUE(cfg) << cfg.error() << "\n" << text;
  ASSERT_EQ(cfg->racks.size(), 3u);
  EXPECT_EQ(format_ipv4(cfg->racks[0].hub_ipv4), hub1);
  ASSERT_EQ(cfg->jobs.size(), 1u);
  size_t ranks = 0;
  for (const auto& [rack, list] : cfg->jobs[0].ranks_by_rack) ranks += list.size();
  EXPECT_EQ(ranks, 12u);
  for (size_t r = 0; r < 3; ++r) EXPECT_EQ(cfg->racks[r].hosts.size(), f.plan.racks.members[r].size());
}

}  // namespace
}  // namespace phub::probe
