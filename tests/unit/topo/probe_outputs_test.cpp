// phub-probe output tests: hosts files, matrix files, report, hostfile, heatmap, and the Lua rack snippet
// loaded by the real config loader inside a minimal config.
#include <gtest/gtest.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <filesystem>
#include <fstream>

#include "heatmap.hpp"
#include "hosts_file.hpp"
#include "matrix_io.hpp"
#include "outputs.hpp"
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

// cairo keeps the toy font faces it made, and fontconfig its configuration, in static caches until exit.
// Releasing both at the end (cairo documents cairo_debug_reset_static_data for leak checkers) leaves
// LeakSanitizer only what the heatmap code itself lost: a surface or context it failed to destroy still shows.
class FontCaches : public ::testing::Environment {
 public:
  void TearDown() override {
    cairo_debug_reset_static_data();
    FcFini();
  }
};
[[maybe_unused]] ::testing::Environment* const kFontCaches = ::testing::AddGlobalTestEnvironment(new FontCaches);

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

// Whether the picture shows `at` as drawn: the text is the expected one, it left ink, and the pixels its
// glyphs may touch are exactly those of the same text drawn alone on white paper (so nothing else was drawn
// over it, and any other text in its place would differ).
bool shows(const Image& img, const TextSpan& at) {
  if (at.box_w <= 0 || at.box_h <= 0 || at.box_x < 0 || at.box_y < 0 ||
      static_cast<unsigned>(at.box_x + at.box_w) > img.width || static_cast<unsigned>(at.box_y + at.box_h) > img.height)
    return false;
  TextSpan copy = at;
  const Image alone = render_text(copy, img.width, img.height);
  bool ink = false;
  for (int y = at.box_y; y < at.box_y + at.box_h; ++y)
    for (int x = at.box_x; x < at.box_x + at.box_w; ++x) {
      const size_t i = (static_cast<size_t>(y) * img.width + static_cast<size_t>(x)) * 3;
      if (!std::equal(&img.rgb[i], &img.rgb[i] + 3, &alone.rgb[i])) return false;
      ink = ink || img.rgb[i] < 128;
    }
  return ink;
}

void expect_reads(const Image& img, const TextSpan& at, const std::string& text) {
  EXPECT_EQ(at.text, text);
  EXPECT_TRUE(shows(img, at)) << "\"" << text << "\" is not drawn where the layout says (" << at.x << ", " << at.y << ")";
}

// The ink of `at` lies inside [lo, hi) along y (horizontal text) or x (vertical text).
void expect_within(const TextSpan& at, unsigned lo, unsigned hi) {
  const int from = at.vertical ? at.box_x : at.box_y, len = at.vertical ? at.box_w : at.box_h;
  EXPECT_GE(from, static_cast<int>(lo)) << at.text;
  EXPECT_LE(from + len, static_cast<int>(hi)) << at.text;
}

const uint8_t* pixel(const Image& img, unsigned x, unsigned y) { return &img.rgb[(size_t{y} * img.width + x) * 3]; }

topo::Matrix renamed(const topo::Matrix& m, const std::vector<std::string>& names) {
  std::vector<topo::Host> hosts = m.hosts();
  for (size_t i = 0; i < hosts.size(); ++i) hosts[i].name = names[i];
  topo::Matrix out(hosts);
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = i + 1; j < m.size(); ++j) out.set(i, j, m.at(i, j));
  return out;
}

// The labels' font is DejaVu Sans (fonts-dejavu-core), not a fallback, and the text check tells texts apart.
TEST(Heatmap, LabelsAreDejaVuSansAndTheTextCheckTellsTextsApart) {
  FcPattern* want = FcNameParse(reinterpret_cast<const FcChar8*>(kFontFamily));
  ASSERT_NE(want, nullptr);
  FcConfigSubstitute(nullptr, want, FcMatchPattern);
  FcDefaultSubstitute(want);
  FcResult result = FcResultNoMatch;
  FcPattern* got = FcFontMatch(nullptr, want, &result);
  ASSERT_NE(got, nullptr);
  FcChar8* family = nullptr;
  EXPECT_EQ(FcPatternGetString(got, FC_FAMILY, 0, &family), FcResultMatch);
  EXPECT_STREQ(reinterpret_cast<const char*>(family), kFontFamily) << "is fonts-dejavu-core installed?";
  FcPatternDestroy(got);
  FcPatternDestroy(want);

  TextSpan a{"rack1", 13};
  a.x = 20, a.y = 30;
  const Image img = render_text(a, 120, 50);
  EXPECT_GT(a.box_w, 20);
  EXPECT_TRUE(shows(img, a));
  TextSpan other = a;
  other.text = "rack7";
  EXPECT_FALSE(shows(img, other));
  other = a;
  other.x += 1;  // one pixel off
  EXPECT_FALSE(shows(img, other));
  other = a;
  other.vertical = true;
  EXPECT_FALSE(shows(img, other));
}

TEST(Heatmap, AxisLabelsDropTheCommonDomainAndElideTheMiddle) {
  EXPECT_EQ(axis_labels({"vm1", "vm2"}), (std::vector<std::string>{"vm1", "vm2"}));
  // A shared domain goes; a shared numeric tail (addresses) stays.
  EXPECT_EQ(axis_labels({"a1.rack.example.net", "b2.rack.example.net"}), (std::vector<std::string>{"a1", "b2"}));
  EXPECT_EQ(axis_labels({"198.18.1.11", "198.18.2.11"}), (std::vector<std::string>{"198.18.1.11", "198.18.2.11"}));
  const auto l = axis_labels({"gpu-node-rack-a-0017", "gpu-node-rack-a-0018", "short"});
  EXPECT_EQ(l[0], "gpu-n~a-0017");
  EXPECT_EQ(l[1], "gpu-n~a-0018");
  EXPECT_EQ(l[2], "short");
  // Ends alike: the tail grows until the labels differ.
  const auto m = axis_labels({"x-0001-long-common-end", "x-0002-long-common-end"});
  EXPECT_NE(m[0], m[1]);
  EXPECT_LE(m[0].size(), kMaxLabelChars);
}

TEST(Heatmap, ScaleTicksAreRoundAndInRange) {
  EXPECT_EQ(scale_ticks(18, 1300, 8), (std::vector<double>{20, 50, 100, 200, 500, 1000}));
  EXPECT_EQ(scale_ticks(18, 1300, 4), (std::vector<double>{30, 100, 300, 1000}));
  EXPECT_EQ(scale_ticks(31, 39, 8), (std::vector<double>{31, 39}));  // no round value inside: the ends
  EXPECT_TRUE(scale_ticks(INFINITY, 0, 8).empty());
  EXPECT_EQ(format_us(20), "20");
  EXPECT_EQ(format_us(2.5), "2.5");
  EXPECT_EQ(format_us(20000), "20k");
}

// 12 hosts in 3 groups, as probe-racks sees them: names on both axes in planned order, groups marked and
// named as racks.lua names them, the colour bar's ticks labelled in µs.
TEST(Outputs, HeatmapNamesHostsGroupsAndScale) {
  Fixture f({4, 4, 4});
  HeatmapLayout lay;
  const Image img = render_heatmap(f.s.matrix, f.plan, &lay);
  ASSERT_EQ(img.rgb.size(), size_t{img.width} * img.height * 3);
  EXPECT_LE(img.width, 800u);
  EXPECT_LE(img.height, 900u);
  ASSERT_EQ(lay.order, f.plan.ring);
  ASSERT_EQ(lay.row_labels.size(), 12u);
  ASSERT_EQ(lay.col_labels.size(), 12u);
  for (size_t p = 0; p < 12; ++p) {
    const std::string& name = f.s.matrix.hosts()[f.plan.ring[p]].name;
    expect_reads(img, lay.row_labels[p], name);
    expect_reads(img, lay.col_labels[p], name);
    // The row's name sits beside the row, left of the strip; the column's above the column, reading upwards.
    expect_within(lay.row_labels[p], lay.y0 + p * lay.cell, lay.y0 + (p + 1) * lay.cell);
    expect_within(lay.col_labels[p], lay.x0 + p * lay.cell, lay.x0 + (p + 1) * lay.cell);
    EXPECT_LT(lay.row_labels[p].box_x + lay.row_labels[p].box_w, static_cast<int>(lay.x0 - 2 - lay.strip));
    EXPECT_LT(lay.col_labels[p].box_y + lay.col_labels[p].box_h, static_cast<int>(lay.y0 - 2 - lay.strip));
    EXPECT_TRUE(lay.col_labels[p].vertical);
    EXPECT_GE(lay.row_labels[p].size, 9.0);  // readable
    EXPECT_EQ(pixel(img, lay.x0 + p * lay.cell + lay.cell / 2, lay.y0 + p * lay.cell + lay.cell / 2)[0], 0);  // diagonal
  }
  ASSERT_EQ(lay.groups.size(), 3u);
  std::set<std::array<uint8_t, 3>> strip_colours;
  for (size_t g = 0; g < 3; ++g) {
    const auto& grp = lay.groups[g];
    EXPECT_EQ(grp.count, f.plan.racks.members[g].size());
    for (unsigned p = grp.first; p < grp.first + grp.count; ++p)
      EXPECT_EQ(f.plan.clustering.group[lay.order[p]], f.plan.clustering.group[f.plan.racks.members[g][0]]);
    expect_reads(img, grp.label, rack_name(g));
    const unsigned mid = lay.y0 + (grp.first * 2 + grp.count) * lay.cell / 2;
    EXPECT_GE(grp.label.box_y + grp.label.box_h, static_cast<int>(mid));  // the name is level with its group
    EXPECT_LE(grp.label.box_y, static_cast<int>(mid));
    EXPECT_GT(grp.label.box_x, static_cast<int>(lay.x0 + lay.side));
    const uint8_t* left = pixel(img, lay.x0 - 2 - lay.strip / 2, mid);
    const uint8_t* top = pixel(img, lay.x0 + (mid - lay.y0), lay.y0 - 2 - lay.strip / 2);
    EXPECT_TRUE(std::equal(left, left + 3, top)) << "left and top strips of group " << g << " differ";
    strip_colours.insert({left[0], left[1], left[2]});
    if (g > 0) {  // a white line on the boundary, across the whole matrix
      const unsigned at = lay.x0 + grp.first * lay.cell - 1;
      for (unsigned y = lay.y0; y < lay.y0 + lay.side; y += lay.cell / 2) EXPECT_EQ(pixel(img, at, y)[1], 255);
    }
  }
  EXPECT_EQ(strip_colours.size(), 3u);
  // The ticks: round values in µs, left to right, each label under its tick, read back as written.
  ASSERT_GE(lay.tick_us.size(), 3u);
  for (size_t i = 0; i < lay.tick_us.size(); ++i) {
    expect_reads(img, lay.tick_labels[i], format_us(lay.tick_us[i]));
    if (i > 0) {
      EXPECT_GT(lay.tick_x[i], lay.tick_x[i - 1]);
    }
    EXPECT_GE(lay.tick_x[i], lay.bar_x);
    EXPECT_LT(lay.tick_x[i], lay.bar_x + lay.bar_w);
    EXPECT_EQ(pixel(img, lay.tick_x[i], lay.bar_y + lay.bar_h + 1)[0], 32);  // the tick mark
  }
  expect_reads(img, lay.title, "median RTT, \u00b5s (log scale)");
  // A cell is coloured as the bar is at its RTT's place on the scale.
  const size_t a = f.plan.ring[0], b = f.plan.ring[11];
  const double lo = lay.tick_us.front(), hi = lay.tick_us.back();
  const double rtt = f.s.matrix.at(a, b).median_us;
  if (rtt > lo && rtt < hi) {
    const double t = (std::log(rtt) - std::log(lo)) / (std::log(hi) - std::log(lo));
    const unsigned x = lay.tick_x.front() + static_cast<unsigned>(std::lround(t * (lay.tick_x.back() - lay.tick_x.front())));
    const uint8_t* cell = pixel(img, lay.x0 + 11 * lay.cell + lay.cell / 2, lay.y0 + lay.cell / 2);
    const uint8_t* bar = pixel(img, x, lay.bar_y + lay.bar_h / 2);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(cell[k], bar[k], 6) << "channel " << k;
  }
  // What the file holds is this picture.
  const std::string path = std::filesystem::temp_directory_path() / "phub_probe_heatmap_test.png";
  ASSERT_TRUE(write_png(path, img));
  cairo_surface_t* png = cairo_image_surface_create_from_png(path.c_str());
  ASSERT_EQ(cairo_surface_status(png), CAIRO_STATUS_SUCCESS);
  ASSERT_EQ(static_cast<unsigned>(cairo_image_surface_get_width(png)), img.width);
  ASSERT_EQ(static_cast<unsigned>(cairo_image_surface_get_height(png)), img.height);
  std::vector<uint8_t> back;
  for (int y = 0; y < cairo_image_surface_get_height(png); ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(cairo_image_surface_get_data(png) +
                                                        static_cast<ptrdiff_t>(y) * cairo_image_surface_get_stride(png));
    for (unsigned x = 0; x < img.width; ++x) {
      for (const int shift : {16, 8, 0}) back.push_back(static_cast<uint8_t>(row[x] >> shift));
    }
  }
  cairo_surface_destroy(png);
  EXPECT_EQ(back, img.rgb);
  std::filesystem::remove(path);
}

// Long names are shortened on the axes; an excluded host is named and marked; a missing pair is grey and
// the legend says so.
TEST(Outputs, HeatmapShortensNamesAndMarksExcludedHosts) {
  Fixture f({4, 5});
  std::vector<std::string> names;
  for (size_t i = 0; i < 9; ++i) names.push_back("gpu-node-" + std::to_string(1000 + i) + ".zone-b.example.net");
  topo::Matrix m = renamed(f.s.matrix, names);
  for (size_t j = 1; j < 9; ++j) m.set(0, j, topo::PairStats{});  // host 0 never answered
  const topo::Plan plan = topo::plan(m, f.opts);
  ASSERT_LT(plan.clustering.group[0], 0);
  HeatmapLayout lay;
  const Image img = render_heatmap(m, plan, &lay);
  ASSERT_EQ(lay.order.back(), 0u);
  expect_reads(img, lay.row_labels.back(), "gpu-n~e-1000");
  expect_reads(img, lay.col_labels.back(), "gpu-n~e-1000");
  expect_reads(img, lay.row_labels.front(), axis_labels(names)[lay.order.front()]);
  ASSERT_EQ(lay.groups.back().count, 1u);
  expect_reads(img, lay.groups.back().label, "excluded");
  const uint8_t* grey = pixel(img, lay.x0 + lay.cell / 2, lay.y0 + 8 * lay.cell + lay.cell / 2);
  EXPECT_EQ(grey[0], 160);
  // The legend's word on the title's line, to its right, beside a grey swatch.
  expect_reads(img, lay.missing_label, "missing");
  EXPECT_EQ(lay.missing_label.y, lay.title.y);
  EXPECT_GT(lay.missing_label.box_x, lay.title.box_x + lay.title.box_w);
  EXPECT_EQ(pixel(img, static_cast<unsigned>(lay.missing_label.box_x) - 8,
                  static_cast<unsigned>(lay.missing_label.y) - 3)[0], 160);
}

// 64 hosts still get names (8-pixel cells) in a picture of reasonable size; more hosts get none.
TEST(Outputs, HeatmapSizeFrom12To64Hosts) {
  for (const auto& sizes : {std::vector<size_t>{16, 16, 16, 16}, std::vector<size_t>{40, 40}}) {
    Fixture f(sizes);
    HeatmapLayout lay;
    const Image img = render_heatmap(f.s.matrix, f.plan, &lay);
    const size_t n = f.s.matrix.size();
    EXPECT_LE(img.width, 800u) << n << " hosts";
    EXPECT_LE(img.height, 900u) << n << " hosts";
    if (n <= 64) {
      ASSERT_EQ(lay.row_labels.size(), n);
      expect_reads(img, lay.row_labels.front(), f.s.matrix.hosts()[lay.order.front()].name);
      expect_reads(img, lay.col_labels.back(), f.s.matrix.hosts()[lay.order.back()].name);
    } else {
      EXPECT_TRUE(lay.row_labels.empty());
      expect_reads(img, lay.groups.front().label, "rack1");
    }
  }
}

// The snippet, pasted unchanged above a minimal config's `return`, loads and validates.
// A fresh directory, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "phub-probe-out-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) != nullptr) path = tmpl;
  }
  ~TempDir() {
    if (!path.empty()) std::filesystem::remove_all(path);
  }
};

// A hub config template: racks.lua through include, the hub's own address and rack filled in per hub.
constexpr const char* kHubTemplate =
    "local plan = include(\"racks.lua\")\n"
    "return {\n"
    "  ports = { { name = \"p0\", device = \"net_null0\", ipv4 = @HUB_IPV4@ .. \"/24\" } },\n"
    "  lcores = { { id = 1 } },\n"
    "  racks = plan.racks,\n"
    "  rack = @RACK@,\n"
    "  jobs = { { id = 1, name = \"j\", workers = 12, port_base = 40000,\n"
    "             secret = \"probe-plan-secret-0123\",\n"
    "             keys = { { name = \"w\", elems = 1024 } },\n"
    "             ranks_by_rack = plan.ranks_by_rack } },\n"
    "}\n";

TEST(Outputs, RacksLuaIsIncludedUnchangedByAConfig) {
  Fixture f({4, 5, 3});
  const PlanInputs in = f.inputs();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  auto files = write_outputs(dir.path.string(), in);
  ASSERT_TRUE(files) << files.error();
  EXPECT_FALSE(std::filesystem::exists(dir.path / "hub-rack1.lua"));  // no template, no hub configs
  // A hand-written config beside racks.lua, as docs/probe.md shows it.
  const std::string hub1 = f.s.matrix.hosts()[f.plan.racks.hub[0]].addr;
  std::string text = kHubTemplate;
  text.replace(text.find("@HUB_IPV4@"), 10, "\"" + hub1 + "\"");
  text.replace(text.find("@RACK@"), 6, "\"rack1\"");
  std::ofstream(dir.path / "hub.lua") << text;
  auto cfg = config::load_file((dir.path / "hub.lua").string());
  ASSERT_TRUE(cfg) << cfg.error() << "\n" << lua_racks(in);
  ASSERT_EQ(cfg->racks.size(), 3u);
  EXPECT_EQ(format_ipv4(cfg->racks[0].hub_ipv4), hub1);
  ASSERT_EQ(cfg->jobs.size(), 1u);
  size_t ranks = 0;
  for (const auto& [rack, list] : cfg->jobs[0].ranks_by_rack) ranks += list.size();
  EXPECT_EQ(ranks, 12u);

  // hosts_by_rack, for a config's own Lua: each rack's hosts, in the order of its ranks in ranks_by_rack. A
  // config beside racks.lua compares them with the plan's members and fails to load on any difference.
  const std::vector<size_t>& ring = f.plan.ring;
  std::string want = "local want = {\n";
  for (size_t r = 0; r < 3; ++r) {
    want += "  { [[" + rack_name(r) + "]], {";
    for (size_t h : f.plan.racks.members[r]) want += " [[" + f.s.matrix.hosts()[h].name + "]],";
    want += " }, {";
    for (size_t h : f.plan.racks.members[r]) {
      want += " " + std::to_string(std::find(ring.begin(), ring.end(), h) - ring.begin()) + ",";
    }
    want += " } },\n";
  }
  want += "}\n"
          "for _, w in ipairs(want) do\n"
          "  local name, hosts, ranks = w[1], w[2], w[3]\n"
          "  local got, got_ranks = plan.hosts_by_rack[name], plan.ranks_by_rack[name]\n"
          "  if #got ~= #hosts then error(name .. ': ' .. #got .. ' hosts, expected ' .. #hosts) end\n"
          "  for i = 1, #hosts do\n"
          "    if got[i] ~= hosts[i] or got_ranks[i] ~= ranks[i] then\n"
          "      error(name .. '[' .. i .. ']: ' .. tostring(got[i]) .. ' rank ' .. tostring(got_ranks[i]))\n"
          "    end\n"
          "  end\n"
          "end\n";
  std::string checked = text;
  checked.insert(checked.find("return {"), want);
  std::ofstream(dir.path / "hub-checked.lua") << checked;
  auto hosts_checked = config::load_file((dir.path / "hub-checked.lua").string());
  EXPECT_TRUE(hosts_checked) << hosts_checked.error() << "\n" << lua_racks(in);
}

TEST(Outputs, HubConfigPerRackFromATemplate) {
  Fixture f({4, 5, 3});
  const PlanInputs in = f.inputs();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  auto files = write_outputs(dir.path.string(), in, kHubTemplate);
  ASSERT_TRUE(files) << files.error();
  for (size_t r = 0; r < 3; ++r) {
    const std::string file = (dir.path / ("hub-" + rack_name(r) + ".lua")).string();
    EXPECT_NE(std::find(files->begin(), files->end(), file), files->end()) << file;
    auto cfg = config::load_file(file);
    ASSERT_TRUE(cfg) << cfg.error();
    EXPECT_EQ(cfg->rack, rack_name(r));
    const std::string hub = f.s.matrix.hosts()[f.plan.racks.hub[r]].addr;
    ASSERT_EQ(cfg->ports.size(), 1u);
    EXPECT_EQ(format_ipv4(cfg->ports[0].ipv4.addr), hub);
    ASSERT_EQ(cfg->racks.size(), 3u);
    EXPECT_EQ(format_ipv4(cfg->racks[r].hub_ipv4), hub);
    ASSERT_EQ(cfg->jobs.size(), 1u);
    EXPECT_EQ(cfg->jobs[0].ranks_by_rack.size(), 3u);
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path / "hub-rack4.lua"));
}

TEST(Outputs, HubConfigTemplateMustNameTheRack) {
  Fixture f({4, 4});
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  auto files = write_outputs((dir.path / "out").string(), f.inputs(), "return { rack = \"rack1\" }\n");
  ASSERT_FALSE(files);
  EXPECT_NE(files.error().find("the hub config template has no @RACK@"), std::string::npos) << files.error();
  EXPECT_FALSE(std::filesystem::exists(dir.path / "out"));  // refused before anything is written
  auto hubs = hub_configs(f.inputs(), "-- @RACK@ @RACK@ @HUB_IPV4@\n");
  ASSERT_TRUE(hubs);
  ASSERT_EQ(hubs->size(), 2u);
  EXPECT_EQ((*hubs)[1].file, "hub-rack2.lua");
  EXPECT_EQ((*hubs)[1].text, "-- \"rack2\" \"rack2\" \"" + f.s.matrix.hosts()[f.plan.racks.hub[1]].addr + "\"\n");
}

TEST(Outputs, AMatrixWithoutAddressesWritesNoRacksLuaAndNoHubConfigs) {
  // A CSV matrix names its hosts only: a racks.lua would give each rack's hub_ipv4 a host name.
  auto m = parse_matrix("host,a,b,c,d\na,0,10,300,300\nb,10,0,300,300\nc,300,300,0,10\nd,300,300,10,0\n");
  ASSERT_TRUE(m) << m.error();
  topo::PlanOptions opts;
  const topo::Plan plan = topo::plan(*m, opts);
  const PlanInputs in{*m, plan, opts, {}};
  auto known = hubs_have_addresses(in);
  ASSERT_FALSE(known);
  EXPECT_NE(known.error().find("has no IPv4 address"), std::string::npos) << known.error();
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  auto files = write_outputs(dir.path.string(), in);
  ASSERT_TRUE(files) << files.error();
  EXPECT_TRUE(std::filesystem::exists(dir.path / "rankmap.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.path / "racks.lua"));
  auto hubs = write_outputs((dir.path / "hubs").string(), in, kHubTemplate);
  ASSERT_FALSE(hubs);
  EXPECT_NE(hubs.error().find("hub configs: rack1's hub"), std::string::npos) << hubs.error();
  // Named by address, the same CSV plans both.
  auto byaddr = parse_matrix("host,198.18.1.1,198.18.1.2,198.18.2.1,198.18.2.2\n"
                             "198.18.1.1,0,10,300,300\n198.18.1.2,10,0,300,300\n"
                             "198.18.2.1,300,300,0,10\n198.18.2.2,300,300,10,0\n");
  ASSERT_TRUE(byaddr) << byaddr.error();
  const topo::Plan plan2 = topo::plan(*byaddr, opts);
  EXPECT_TRUE(hubs_have_addresses(PlanInputs{*byaddr, plan2, opts, {}}));
}

}  // namespace
}  // namespace phub::probe
