// PNG heatmap of the RTT matrix in planned order, drawn with cairo in DejaVu Sans: host names on both axes,
// group boundaries, strips and labels, and a colour bar labelled in µs with a legend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "phub/base/expected.hpp"
#include "phub/topo/plan.hpp"

namespace phub::probe {

struct Image {
  unsigned width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel
};

// A piece of text in the picture. Horizontal text starts at (x, y), the left end of its baseline. Vertical
// text reads bottom to top: (x, y) is the bottom end of its baseline, and the glyphs' tops point left.
struct TextSpan {
  std::string text;
  double size = 12;  // font size in pixels
  bool vertical = false;
  int x = 0, y = 0;
  // The pixels its glyphs may touch (a pixel of margin around their ink), set where it is drawn.
  int box_x = 0, box_y = 0, box_w = 0, box_h = 0;
};

// Where render_heatmap put things; the tests read the picture through it.
struct HeatmapLayout {
  std::vector<size_t> order;  // matrix row of each position: ring order, then excluded hosts
  unsigned cell = 0, x0 = 0, y0 = 0, side = 0;  // the matrix: top left and side, in pixels
  std::vector<TextSpan> row_labels, col_labels;  // one per position (empty when the cells are too small)
  struct Group {
    unsigned first = 0, count = 0;  // positions
    TextSpan label;                 // "rack1", ... as racks.lua names them; "excluded"
  };
  std::vector<Group> groups;
  unsigned strip = 0;  // the group colour strips: left of the matrix at x0 - gap - strip, above it likewise
  unsigned bar_x = 0, bar_y = 0, bar_w = 0, bar_h = 0;
  std::vector<double> tick_us;
  std::vector<unsigned> tick_x;
  std::vector<TextSpan> tick_labels;
  TextSpan title;
  TextSpan missing_label;  // beside the grey swatch; empty text when no pair is missing
};

inline constexpr size_t kMaxLabelChars = 12;
// The smallest cell that still gets a host name beside it: up to 64 hosts.
inline constexpr unsigned kMinLabelledCell = 10;
// The font of every label (Debian's fonts-dejavu-core, found through fontconfig).
inline constexpr const char* kFontFamily = "DejaVu Sans";

// Axis labels for `names`: a suffix after a dot that every name shares and that holds a letter (a common
// domain) is dropped, then names longer than `max_chars` characters keep their start and end around a '~'.
// The end gets half the room, or as much more (else as much less) as the labels need to stay distinct, where
// possible. Bytes that are not valid UTF-8 become U+FFFD.
[[nodiscard]] std::vector<std::string> axis_labels(const std::vector<std::string>& names,
                                                   size_t max_chars = kMaxLabelChars);

// Tick values for a log colour scale over [lo_us, hi_us]: 1-2-5 steps, thinned to at most `max_ticks`;
// the two ends when fewer than two such values fall inside.
[[nodiscard]] std::vector<double> scale_ticks(double lo_us, double hi_us, size_t max_ticks);
[[nodiscard]] std::string format_us(double us);

// Hosts in ring order, excluded hosts last. Colour: log of the median RTT, dark = near, yellow = far;
// grey = missing pair, black = diagonal; white lines separate groups.
[[nodiscard]] Image render_heatmap(const topo::Matrix& m, const topo::Plan& plan, HeatmapLayout* layout = nullptr);

// `t` alone, drawn as render_heatmap draws its text, on white paper of the given size, its box set (for the
// tests).
[[nodiscard]] Image render_text(TextSpan& t, unsigned width, unsigned height);

[[nodiscard]] Expected<void, std::string> write_png(const std::string& path, const Image& img);

}  // namespace phub::probe
