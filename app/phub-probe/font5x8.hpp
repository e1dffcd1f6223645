// A small fixed-width bitmap font for the heatmap's labels: 5x8 glyphs (caps and digits 7 rows high, one
// row for descenders), 6 pixels from one character to the next. ASCII letters, digits, a few symbols and µ.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace phub::probe::font {

inline constexpr unsigned kGlyphWidth = 5, kGlyphHeight = 8, kAdvance = kGlyphWidth + 1;
inline constexpr char32_t kMicro = U'\u00b5';

// One row per byte, top first; bit 4 is the leftmost column.
using Glyph = std::array<uint8_t, kGlyphHeight>;

// The glyph of `c`; characters the font lacks draw as '?'.
[[nodiscard]] const Glyph& glyph(char32_t c);
// True if the font has a glyph of its own for `c`.
[[nodiscard]] bool has_glyph(char32_t c);

// UTF-8 text as code points (an invalid byte becomes '?').
[[nodiscard]] std::u32string decode_utf8(std::string_view text);

// Pixels the text takes along its direction at `scale` (no trailing gap).
[[nodiscard]] inline unsigned text_length(size_t chars, unsigned scale) {
  return chars == 0 ? 0 : static_cast<unsigned>(chars * kAdvance - 1) * scale;
}

}  // namespace phub::probe::font
