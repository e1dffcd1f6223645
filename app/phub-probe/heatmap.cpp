// Heatmap drawing with cairo (cells, names, groups, labelled colour bar, legend) and PNG writing.
#include "heatmap.hpp"

#include <cairo.h>
#include <glib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>

#include "report.hpp"

namespace phub::probe {
namespace {

using Rgb = std::array<uint8_t, 3>;

constexpr unsigned kMargin = 12, kLine = 2, kGap = 4, kStrip = 6, kTick = 4, kBarHeight = 14;
constexpr double kTextSize = 13;  // group names, tick values, title and legend
constexpr Rgb kInk{32, 32, 32}, kWhite{255, 255, 255}, kMissing{160, 160, 160}, kSelf{0, 0, 0};
// One colour per group strip, in turn; excluded hosts get the missing-pair grey.
constexpr std::array<Rgb, 8> kGroupColours{{{200, 60, 60}, {60, 110, 200}, {60, 160, 80}, {150, 80, 170},
                                            {230, 140, 30}, {40, 170, 170}, {170, 120, 60}, {220, 90, 160}}};

// Five anchors of a perceptually ordered dark-blue to yellow map, linearly interpolated.
Rgb colour(double t) {
  static constexpr std::array<Rgb, 5> kAnchors{{{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}}};
  t = std::clamp(t, 0.0, 1.0) * (kAnchors.size() - 1);
  const auto i = std::min<size_t>(static_cast<size_t>(t), kAnchors.size() - 2);
  const double f = t - static_cast<double>(i);
  Rgb c{};
  for (size_t k = 0; k < 3; ++k) c[k] = static_cast<uint8_t>(std::lround(kAnchors[i][k] * (1 - f) + kAnchors[i + 1][k] * f));
  return c;
}

// A cairo image surface and its context: rectangles on whole pixels, text in kFontFamily with fixed
// rendering options (grey antialiasing, slight hinting), so that the same text draws the same pixels anywhere.
class Canvas {
 public:
  Canvas(unsigned w, unsigned h)
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(w), static_cast<int>(h))),
        cr_(cairo_create(surface_)) {
    cairo_set_antialias(cr_, CAIRO_ANTIALIAS_NONE);
    cairo_font_options_t* fo = cairo_font_options_create();
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_ON);
    cairo_set_font_options(cr_, fo);
    cairo_font_options_destroy(fo);
    cairo_select_font_face(cr_, kFontFamily, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    fill(0, 0, w, h, kWhite);
  }
  ~Canvas() {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
  }
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  void fill(unsigned x, unsigned y, unsigned w, unsigned h, Rgb c) {
    cairo_set_source_rgb(cr_, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
    cairo_rectangle(cr_, x, y, w, h);
    cairo_fill(cr_);
  }
  // How far the text advances, and the height of a digit above the baseline (to centre text on a line).
  double advance(const std::string& text, double size) { return extents(text, size).x_advance; }
  double digit_height(double size) { return extents("0", size).height; }

  // Draws `t` and records the pixels its ink covers.
  void text(TextSpan& t, Rgb c) {
    t.text = valid(t.text);
    const cairo_text_extents_t e = extents(t.text, t.size);
    double x0 = t.x + e.x_bearing, x1 = x0 + e.width, y0 = t.y + e.y_bearing, y1 = y0 + e.height;
    if (t.vertical) {  // text space (u, v) lands on (x + v, y - u)
      x0 = t.x + e.y_bearing, x1 = x0 + e.height, y1 = t.y - e.x_bearing, y0 = y1 - e.width;
    }
    t.box_x = static_cast<int>(std::floor(x0)), t.box_y = static_cast<int>(std::floor(y0));
    t.box_w = static_cast<int>(std::ceil(x1)) - t.box_x, t.box_h = static_cast<int>(std::ceil(y1)) - t.box_y;
    cairo_save(cr_);
    cairo_set_source_rgb(cr_, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0);
    cairo_set_font_size(cr_, t.size);
    cairo_translate(cr_, t.x, t.y);
    if (t.vertical) cairo_rotate(cr_, -M_PI / 2);
    cairo_move_to(cr_, 0, 0);
    cairo_show_text(cr_, t.text.c_str());
    cairo_restore(cr_);
  }

  Image take() {
    cairo_surface_flush(surface_);
    Image img;
    img.width = static_cast<unsigned>(cairo_image_surface_get_width(surface_));
    img.height = static_cast<unsigned>(cairo_image_surface_get_height(surface_));
    img.rgb.reserve(size_t{img.width} * img.height * 3);
    const unsigned char* data = cairo_image_surface_get_data(surface_);
    const int stride = cairo_image_surface_get_stride(surface_);
    for (unsigned y = 0; y < img.height; ++y) {
      const auto* row = reinterpret_cast<const uint32_t*>(data + static_cast<ptrdiff_t>(y) * stride);
      for (unsigned x = 0; x < img.width; ++x) {
        img.rgb.push_back(static_cast<uint8_t>(row[x] >> 16));
        img.rgb.push_back(static_cast<uint8_t>(row[x] >> 8));
        img.rgb.push_back(static_cast<uint8_t>(row[x]));
      }
    }
    return img;
  }

 private:
  static std::string valid(const std::string& s) {  // cairo draws nothing more after invalid UTF-8
    const std::unique_ptr<gchar, decltype(&g_free)> v(g_utf8_make_valid(s.data(), static_cast<gssize>(s.size())), g_free);
    return v.get();
  }
  cairo_text_extents_t extents(const std::string& text, double size) {
    cairo_set_font_size(cr_, size);
    cairo_text_extents_t e{};
    cairo_text_extents(cr_, valid(text).c_str(), &e);
    return e;
  }

  cairo_surface_t* surface_;
  cairo_t* cr_;
};

}  // namespace

Image render_heatmap(const topo::Matrix& m, const topo::Plan& plan, HeatmapLayout* layout_out) {
  HeatmapLayout L;
  L.order = plan.ring;
  for (size_t i = 0; i < m.size(); ++i)
    if (plan.clustering.group[i] < 0) L.order.push_back(i);
  const auto n = static_cast<unsigned>(L.order.size());
  L.cell = std::clamp(640u / std::max(n, 1u), 4u, 48u);
  L.side = n * L.cell;
  L.strip = kStrip;
  const bool names = L.cell >= kMinLabelledCell;
  const double name_size = std::clamp(L.cell - 1.0, 8.0, kTextSize);
  Canvas ruler(1, 1);  // measures before the picture's size is known
  const double name_digit = ruler.digit_height(name_size), digit = ruler.digit_height(kTextSize);

  // Host names, and the groups as runs of one group id along the order.
  std::vector<std::string> host_names;
  for (size_t h : L.order) host_names.push_back(m.hosts()[h].name);
  const std::vector<std::string> labels = names ? axis_labels(host_names) : std::vector<std::string>{};
  double names_px = 0;
  for (const std::string& l : labels) names_px = std::max(names_px, ruler.advance(l, name_size));
  std::vector<int> rack_of(m.size(), -1);
  for (size_t r = 0; r < plan.racks.members.size(); ++r)
    for (size_t h : plan.racks.members[r]) rack_of[h] = static_cast<int>(r);
  for (unsigned p = 0; p < n; ++p) {
    const int g = plan.clustering.group[L.order[p]];
    if (p == 0 || g != plan.clustering.group[L.order[p - 1]]) {
      HeatmapLayout::Group grp{p, 0, {}};
      const int rack = rack_of[L.order[p]];
      grp.label.text = g < 0 ? "excluded" : rack >= 0 ? rack_name(static_cast<size_t>(rack)) : "group" + std::to_string(g + 1);
      grp.label.size = kTextSize;
      L.groups.push_back(grp);
    }
    ++L.groups.back().count;
  }
  double group_px = 0;
  for (const auto& g : L.groups) group_px = std::max(group_px, ruler.advance(g.label.text, kTextSize));

  // Left to right: names, strip, matrix, bracket and group names. Top to bottom: names, strip, matrix, bar.
  const auto names_end = kMargin + static_cast<unsigned>(std::ceil(names_px));
  L.x0 = names_end + (names ? kGap : 0) + L.strip + kLine;
  L.y0 = L.x0;
  const unsigned bracket_x = L.x0 + L.side + kGap, group_x = bracket_x + 4 + kGap;
  L.bar_x = L.x0;
  L.bar_w = L.side;
  L.bar_h = kBarHeight;
  L.bar_y = L.y0 + L.side + 4 * kGap;
  const auto ticks_baseline = static_cast<int>(L.bar_y + L.bar_h + kTick + 2 + std::ceil(digit));

  // The scale: log of the median RTT over the present pairs.
  double lo = INFINITY, hi = 0.0;
  bool missing = false;
  for (size_t a : L.order)
    for (size_t b : L.order)
      if (a != b && m.at(a, b).present) lo = std::min(lo, m.at(a, b).median_us), hi = std::max(hi, m.at(a, b).median_us);
      else if (a != b) missing = true;
  const double span = hi > lo ? std::log(hi / lo) : 1.0;
  auto scale = [&](double us) { return std::isfinite(lo) ? std::log(std::max(us, lo) / lo) / span : 0.0; };
  const double widest_tick = ruler.advance("000k", kTextSize);
  L.tick_us = scale_ticks(lo, hi, std::max<size_t>(2, static_cast<size_t>(L.side / (widest_tick + 3 * kGap))));
  double right = std::max<double>(L.x0 + L.side, group_x + group_px);
  for (double v : L.tick_us) {
    const unsigned x = L.bar_x + static_cast<unsigned>(std::lround(scale(v) * (L.bar_w - 1)));
    TextSpan t{format_us(v), kTextSize};
    t.x = std::max(0, static_cast<int>(std::lround(x - ruler.advance(t.text, kTextSize) / 2)));
    t.y = ticks_baseline;
    right = std::max(right, t.x + ruler.advance(t.text, kTextSize));
    L.tick_x.push_back(x);
    L.tick_labels.push_back(t);
  }
  L.title = {std::isfinite(lo) ? "median RTT, \u00b5s (log scale)" : "no pair was measured", kTextSize};
  L.title.x = static_cast<int>(L.bar_x);
  L.title.y = static_cast<int>(ticks_baseline + std::ceil(kTextSize * 1.5));
  const double title_end = L.title.x + ruler.advance(L.title.text, kTextSize);
  const auto swatch_x = static_cast<unsigned>(std::ceil(title_end)) + 6 * kGap;
  const auto swatch = static_cast<unsigned>(std::ceil(digit)) + 2;
  if (missing) {
    L.missing_label = {"missing", kTextSize};
    L.missing_label.x = static_cast<int>(swatch_x + swatch + kGap);
    L.missing_label.y = L.title.y;
    right = std::max(right, L.missing_label.x + ruler.advance(L.missing_label.text, kTextSize));
  }
  right = std::max(right, title_end);
  Canvas c(static_cast<unsigned>(std::ceil(right)) + kMargin, static_cast<unsigned>(L.title.y + std::ceil(kTextSize * 0.3)) + kMargin);

  // Cells, then white lines on group boundaries.
  for (unsigned r = 0; r < n; ++r)
    for (unsigned col = 0; col < n; ++col) {
      const topo::PairStats& p = m.at(L.order[r], L.order[col]);
      const Rgb rgb = r == col ? kSelf : (p.present ? colour(scale(p.median_us)) : kMissing);
      c.fill(L.x0 + col * L.cell, L.y0 + r * L.cell, L.cell, L.cell, rgb);
    }
  for (size_t g = 1; g < L.groups.size(); ++g) {
    const unsigned at = L.x0 + L.groups[g].first * L.cell - kLine / 2;
    c.fill(at, L.y0, kLine, L.side, kWhite);
    c.fill(L.x0, at, L.side, kLine, kWhite);
  }

  // Group strips along the left and top edges, a bracket and the group's name on the right.
  for (size_t g = 0; g < L.groups.size(); ++g) {
    HeatmapLayout::Group& grp = L.groups[g];
    const bool excluded = grp.label.text == "excluded";
    const Rgb col = excluded ? kMissing : kGroupColours[g % kGroupColours.size()];
    const unsigned from = grp.first * L.cell, len = grp.count * L.cell;
    const unsigned inset = g > 0 ? kLine / 2 : 0;  // strips stop where the white line starts
    c.fill(L.x0 - kLine - L.strip, L.y0 + from + inset, L.strip, len - inset, col);
    c.fill(L.x0 + from + inset, L.y0 - kLine - L.strip, len - inset, L.strip, col);
    c.fill(bracket_x, L.y0 + from + inset + 1, 2, len - inset - 2, kInk);
    c.fill(bracket_x, L.y0 + from + inset + 1, 4, 2, kInk);
    c.fill(bracket_x, L.y0 + from + len - 3, 4, 2, kInk);
    grp.label.x = static_cast<int>(group_x);
    grp.label.y = static_cast<int>(std::lround(L.y0 + from + len / 2.0 + digit / 2));
    c.text(grp.label, kInk);
  }

  // Host names: right-aligned before the rows, and reading upwards above the columns.
  for (unsigned p = 0; p < labels.size(); ++p) {
    const auto centre = static_cast<int>(std::lround(p * L.cell + L.cell / 2.0 + name_digit / 2));
    TextSpan row{labels[p], name_size};
    row.x = static_cast<int>(std::lround(names_end - ruler.advance(labels[p], name_size)));
    row.y = static_cast<int>(L.y0) + centre;
    TextSpan column{labels[p], name_size, true, static_cast<int>(L.x0) + centre, static_cast<int>(names_end)};
    c.text(row, kInk);
    c.text(column, kInk);
    L.row_labels.push_back(row);
    L.col_labels.push_back(column);
  }

  // The colour bar, its ticks and their values, the title and the legend of the missing-pair grey.
  for (unsigned x = 0; x < L.bar_w; ++x)
    c.fill(L.bar_x + x, L.bar_y, 1, L.bar_h, colour(static_cast<double>(x) / std::max(L.bar_w - 1, 1u)));
  for (size_t i = 0; i < L.tick_x.size(); ++i) {
    c.fill(L.tick_x[i] >= 1 ? L.tick_x[i] - 1 : 0, L.bar_y + L.bar_h, 2, kTick, kInk);
    c.text(L.tick_labels[i], kInk);
  }
  c.text(L.title, kInk);
  if (missing) {
    c.fill(swatch_x, static_cast<unsigned>(L.title.y) - swatch + 1, swatch, swatch, kMissing);
    c.text(L.missing_label, kInk);
  }
  if (layout_out != nullptr) *layout_out = std::move(L);
  return c.take();
}

Image render_text(TextSpan& t, unsigned width, unsigned height) {
  Canvas c(width, height);
  c.text(t, kInk);
  return c.take();
}

Expected<void, std::string> write_png(const std::string& path, const Image& img) {
  cairo_surface_t* s =
      cairo_image_surface_create(CAIRO_FORMAT_RGB24, static_cast<int>(img.width), static_cast<int>(img.height));
  cairo_surface_flush(s);
  unsigned char* data = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  for (unsigned y = 0; data != nullptr && y < img.height; ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + static_cast<ptrdiff_t>(y) * stride);
    for (unsigned x = 0; x < img.width; ++x) {
      const uint8_t* p = &img.rgb[(size_t{y} * img.width + x) * 3];
      row[x] = uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2];
    }
  }
  cairo_surface_mark_dirty(s);
  const cairo_status_t st = cairo_surface_write_to_png(s, path.c_str());
  cairo_surface_destroy(s);
  if (st != CAIRO_STATUS_SUCCESS) return unexpected("cannot write " + path + ": " + cairo_status_to_string(st));
  return {};
}

}  // namespace phub::probe
