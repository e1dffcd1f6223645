// Heatmap rendering (cells, names, groups, labelled colour bar) and PNG encoding (libpng simplified API).
#include "heatmap.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <set>

#include "font5x8.hpp"
#include "report.hpp"

namespace phub::probe {
namespace {

using Rgb = std::array<uint8_t, 3>;

constexpr unsigned kMargin = 8, kLine = 2;
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

class Canvas {
 public:
  Canvas(unsigned w, unsigned h) : img_{w, h, std::vector<uint8_t>(size_t{w} * h * 3, 255)} {}
  void fill(unsigned x0, unsigned y0, unsigned w, unsigned h, Rgb c) {
    for (unsigned y = y0; y < y0 + h && y < img_.height; ++y)
      for (unsigned x = x0; x < x0 + w && x < img_.width; ++x)
        std::copy(c.begin(), c.end(), img_.rgb.begin() + static_cast<long>((size_t{y} * img_.width + x) * 3));
  }
  void text(const TextSpan& t, Rgb c) {
    const std::u32string chars = font::decode_utf8(t.text);
    const unsigned s = t.scale;
    for (size_t i = 0; i < chars.size(); ++i) {
      const font::Glyph& g = font::glyph(chars[i]);
      for (unsigned gy = 0; gy < font::kGlyphHeight; ++gy)
        for (unsigned gx = 0; gx < font::kGlyphWidth; ++gx) {
          if (((g[gy] >> (font::kGlyphWidth - 1 - gx)) & 1u) == 0) continue;
          const unsigned along = static_cast<unsigned>(i) * font::kAdvance + gx;
          if (t.vertical) fill(t.x + gy * s, t.y - (along + 1) * s, s, s, c);
          else fill(t.x + along * s, t.y + gy * s, s, s, c);
        }
    }
  }
  Image take() { return std::move(img_); }

 private:
  Image img_;
};

size_t chars_of(const std::string& s) { return font::decode_utf8(s).size(); }

// The text between code points [from, to) of `s`.
std::string slice(const std::string& s, size_t from, size_t to) {
  const std::u32string cps = font::decode_utf8(s);
  std::string out;
  for (size_t i = from; i < to && i < cps.size(); ++i) {
    const char32_t c = cps[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += '?';  // the font has nothing beyond U+07FF anyway
    }
  }
  return out;
}

// The longest suffix ".xxx" that every name has, holds a letter and leaves something before it.
size_t common_domain_chars(const std::vector<std::string>& names) {
  if (names.size() < 2) return 0;
  const std::string& first = names.front();
  size_t best = 0;
  for (size_t dot = first.find('.'); dot != std::string::npos; dot = first.find('.', dot + 1)) {
    const std::string suffix = first.substr(dot);
    if (dot == 0 || std::none_of(suffix.begin(), suffix.end(), [](char c) { return std::isalpha(static_cast<unsigned char>(c)); }))
      continue;
    const bool shared = std::all_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
    if (shared) {
      best = suffix.size();
      break;  // the first dot gives the longest suffix
    }
  }
  return best;
}

}  // namespace

std::vector<std::string> axis_labels(const std::vector<std::string>& names, size_t max_chars) {
  const size_t domain = common_domain_chars(names);
  std::vector<std::string> base;
  for (const std::string& n : names) base.push_back(n.substr(0, n.size() - domain));
  if (max_chars < 3) max_chars = 3;
  std::vector<std::string> out;
  // The end usually tells hosts apart (node-0017): it gets half the room, then more while labels collide,
  // then less (a longer start) if that did not help.
  std::vector<size_t> tails;
  for (size_t tail = max_chars / 2; tail + 2 <= max_chars; ++tail) tails.push_back(tail);
  for (size_t tail = max_chars / 2 - 1; tail >= 1; --tail) tails.push_back(tail);
  for (size_t tail : tails) {
    out.clear();
    for (const std::string& b : base) {
      const size_t len = chars_of(b);
      out.push_back(len <= max_chars ? b : slice(b, 0, max_chars - 1 - tail) + "~" + slice(b, len - tail, len));
    }
    if (std::set<std::string>(out.begin(), out.end()).size() == out.size()) return out;
  }
  return tails.empty() ? base : out;
}

std::vector<double> scale_ticks(double lo_us, double hi_us, size_t max_ticks) {
  if (!(lo_us > 0) || !std::isfinite(lo_us) || !(hi_us >= lo_us)) return {};
  if (hi_us == lo_us) return {lo_us};
  for (const std::vector<double>& steps : {std::vector<double>{1, 2, 5}, {1, 3}, {1}}) {
    std::vector<double> ticks;
    for (double decade = std::pow(10.0, std::floor(std::log10(lo_us))); decade <= hi_us; decade *= 10)
      for (double m : steps)
        if (const double v = m * decade; v >= lo_us * (1 - 1e-9) && v <= hi_us * (1 + 1e-9)) ticks.push_back(v);
    if (ticks.size() < 2) return {lo_us, hi_us};
    if (ticks.size() <= max_ticks) return ticks;
  }
  // Decades alone are still too many: every k-th of them.
  std::vector<double> decades, out;
  for (double d = std::pow(10.0, std::ceil(std::log10(lo_us))); d <= hi_us * (1 + 1e-9); d *= 10) decades.push_back(d);
  const size_t k = (decades.size() + std::max<size_t>(max_ticks, 1) - 1) / std::max<size_t>(max_ticks, 1);
  for (size_t i = 0; i < decades.size(); i += k) out.push_back(decades[i]);
  return out;
}

std::string format_us(double us) {
  char buf[32];
  if (us >= 10000) std::snprintf(buf, sizeof buf, "%.0fk", us / 1000);
  else if (us >= 10 || us == std::round(us)) std::snprintf(buf, sizeof buf, "%.0f", us);
  else std::snprintf(buf, sizeof buf, "%.1f", us);
  return buf;
}

Image render_heatmap(const topo::Matrix& m, const topo::Plan& plan, HeatmapLayout* layout_out) {
  HeatmapLayout L;
  L.order = plan.ring;
  for (size_t i = 0; i < m.size(); ++i)
    if (plan.clustering.group[i] < 0) L.order.push_back(i);
  const auto n = static_cast<unsigned>(L.order.size());
  L.cell = std::clamp(512u / std::max(n, 1u), 4u, 48u);
  L.side = n * L.cell;
  const unsigned s = L.cell >= 2 * font::kGlyphHeight ? 2 : 1;  // text scale
  const unsigned text_h = font::kGlyphHeight * s, gap = 3 * s;
  L.strip = 3 * s;
  const bool names = L.cell >= kMinLabelledCell;

  // Host names, and the groups as runs of one group id along the order.
  std::vector<std::string> host_names;
  for (size_t h : L.order) host_names.push_back(m.hosts()[h].name);
  const std::vector<std::string> labels = names ? axis_labels(host_names) : std::vector<std::string>{};
  size_t label_chars = 0;
  for (const std::string& l : labels) label_chars = std::max(label_chars, chars_of(l));
  std::vector<int> rack_of(m.size(), -1);
  for (size_t r = 0; r < plan.racks.members.size(); ++r)
    for (size_t h : plan.racks.members[r]) rack_of[h] = static_cast<int>(r);
  for (unsigned p = 0; p < n; ++p) {
    const int g = plan.clustering.group[L.order[p]];
    if (p == 0 || g != plan.clustering.group[L.order[p - 1]]) {
      HeatmapLayout::Group grp{p, 0, {}};
      const int rack = rack_of[L.order[p]];
      grp.label.text = g < 0 ? "excluded" : rack >= 0 ? rack_name(static_cast<size_t>(rack)) : "group" + std::to_string(g + 1);
      L.groups.push_back(grp);
    }
    ++L.groups.back().count;
  }
  size_t group_chars = 0;
  for (const auto& g : L.groups) group_chars = std::max(group_chars, chars_of(g.label.text));

  // Left to right: names, strip, matrix, bracket and group names. Top to bottom: names, strip, matrix, bar.
  const unsigned names_px = font::text_length(label_chars, s);
  L.x0 = kMargin + names_px + (names ? gap : 0) + L.strip + kLine;
  L.y0 = L.x0;
  const unsigned bracket_x = L.x0 + L.side + gap, group_x = bracket_x + 2 * s + gap;
  L.bar_x = L.x0;
  L.bar_w = L.side;
  L.bar_h = 12 * s;
  L.bar_y = L.y0 + L.side + 4 * gap;
  const unsigned tick_len = 2 * s, ticks_y = L.bar_y + L.bar_h + tick_len + s;

  // The scale: log of the median RTT over the present pairs.
  double lo = INFINITY, hi = 0.0;
  bool missing = false;
  for (size_t a : L.order)
    for (size_t b : L.order)
      if (a != b && m.at(a, b).present) lo = std::min(lo, m.at(a, b).median_us), hi = std::max(hi, m.at(a, b).median_us);
      else if (a != b) missing = true;
  const double span = hi > lo ? std::log(hi / lo) : 1.0;
  auto scale = [&](double us) { return std::isfinite(lo) ? std::log(std::max(us, lo) / lo) / span : 0.0; };
  const unsigned widest_tick = font::text_length(5, s);
  L.tick_us = scale_ticks(lo, hi, std::max<size_t>(2, L.side / (widest_tick + 2 * font::kAdvance * s)));
  for (double v : L.tick_us) {
    const unsigned x = L.bar_x + static_cast<unsigned>(std::lround(scale(v) * (L.bar_w - 1)));
    const std::string text = format_us(v);
    const unsigned w = font::text_length(chars_of(text), s);
    L.tick_x.push_back(x);
    L.tick_labels.push_back({text, x >= w / 2 ? x - w / 2 : 0, ticks_y, s, false});
  }
  L.title = {std::isfinite(lo) ? "median RTT, \u00b5s (log scale)" : "no pair was measured", L.bar_x,
             ticks_y + text_h + gap, s, false};
  const unsigned legend_x = L.title.x + font::text_length(chars_of(L.title.text), s) + 4 * gap;
  const TextSpan missing_label{"missing", legend_x + text_h + gap, L.title.y, s, false};

  unsigned width = std::max(group_x + font::text_length(group_chars, s),
                            (missing ? missing_label.x + font::text_length(7, s) : L.title.x + font::text_length(chars_of(L.title.text), s)));
  for (const TextSpan& t : L.tick_labels) width = std::max(width, t.x + font::text_length(chars_of(t.text), s));
  Canvas c(width + kMargin, L.title.y + text_h + kMargin);

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
    c.fill(bracket_x, L.y0 + from + inset + s, s, len - inset - 2 * s, kInk);
    c.fill(bracket_x, L.y0 + from + inset + s, 2 * s, s, kInk);
    c.fill(bracket_x, L.y0 + from + len - 2 * s, 2 * s, s, kInk);
    const unsigned mid = L.y0 + from + len / 2;
    grp.label.x = group_x;
    grp.label.y = mid >= text_h / 2 ? mid - text_h / 2 : 0;
    grp.label.scale = s;
    c.text(grp.label, kInk);
  }

  // Host names: right-aligned before the rows, and reading upwards above the columns.
  for (unsigned p = 0; p < labels.size(); ++p) {
    const unsigned w = font::text_length(chars_of(labels[p]), s), centre = (L.cell - text_h) / 2;
    const unsigned end = L.x0 - kLine - L.strip - gap;
    L.row_labels.push_back({labels[p], end - w, L.y0 + p * L.cell + centre, s, false});
    L.col_labels.push_back({labels[p], L.x0 + p * L.cell + centre, end, s, true});
    c.text(L.row_labels.back(), kInk);
    c.text(L.col_labels.back(), kInk);
  }

  // The colour bar, its ticks and their values, the title and the missing-pair swatch.
  for (unsigned x = 0; x < L.bar_w; ++x)
    c.fill(L.bar_x + x, L.bar_y, 1, L.bar_h, colour(static_cast<double>(x) / std::max(L.bar_w - 1, 1u)));
  for (size_t i = 0; i < L.tick_x.size(); ++i) {
    c.fill(L.tick_x[i] >= s / 2 ? L.tick_x[i] - s / 2 : 0, L.bar_y + L.bar_h, s, tick_len, kInk);
    c.text(L.tick_labels[i], kInk);
  }
  c.text(L.title, kInk);
  if (missing) {
    c.fill(legend_x, L.title.y, text_h - s, text_h - s, kMissing);
    c.text(missing_label, kInk);
  }
  if (layout_out != nullptr) *layout_out = std::move(L);
  return c.take();
}

Expected<void, std::string> write_png(const std::string& path, const Image& img) {
  png_image pi{};
  pi.version = PNG_IMAGE_VERSION;
  pi.width = img.width;
  pi.height = img.height;
  pi.format = PNG_FORMAT_RGB;
  if (png_image_write_to_file(&pi, path.c_str(), 0, img.rgb.data(), 0, nullptr) == 0) {
    std::string msg = "cannot write " + path + ": " + pi.message;
    png_image_free(&pi);
    return unexpected(std::move(msg));
  }
  return {};
}

}  // namespace phub::probe
