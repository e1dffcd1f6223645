// Heatmap rendering and PNG encoding (libpng simplified API).
#include "heatmap.hpp"

#include <png.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace phub::probe {
namespace {

constexpr unsigned kMargin = 8, kBarGap = 8, kBarHeight = 12, kLine = 2;
using Rgb = std::array<uint8_t, 3>;

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
  Image take() { return std::move(img_); }

 private:
  Image img_;
};

}  // namespace

Image render_heatmap(const topo::Matrix& m, const topo::Plan& plan) {
  std::vector<size_t> order = plan.ring;
  for (size_t i = 0; i < m.size(); ++i)
    if (plan.clustering.group[i] < 0) order.push_back(i);
  const auto n = static_cast<unsigned>(order.size());
  const unsigned cell = std::clamp(512u / std::max(n, 1u), 4u, 48u), side = n * cell;
  double lo = INFINITY, hi = 0.0;
  for (size_t a : order)
    for (size_t b : order)
      if (a != b && m.at(a, b).present) lo = std::min(lo, m.at(a, b).median_us), hi = std::max(hi, m.at(a, b).median_us);
  const double span = hi > lo ? std::log(hi / lo) : 1.0;
  auto scale = [&](double us) { return std::isfinite(lo) ? std::log(std::max(us, lo) / lo) / span : 0.0; };

  Canvas c(side + 2 * kMargin, side + 2 * kMargin + kBarGap + kBarHeight);
  for (unsigned r = 0; r < n; ++r)
    for (unsigned col = 0; col < n; ++col) {
      const topo::PairStats& p = m.at(order[r], order[col]);
      const Rgb rgb = r == col ? Rgb{0, 0, 0} : (p.present ? colour(scale(p.median_us)) : Rgb{160, 160, 160});
      c.fill(kMargin + col * cell, kMargin + r * cell, cell, cell, rgb);
    }
  for (unsigned r = 1; r < n; ++r) {
    const int g0 = plan.clustering.group[order[r - 1]], g1 = plan.clustering.group[order[r]];
    if (g0 == g1) continue;
    const unsigned at = kMargin + r * cell - kLine / 2;
    c.fill(at, kMargin, kLine, side, {255, 255, 255});
    c.fill(kMargin, at, side, kLine, {255, 255, 255});
  }
  for (unsigned x = 0; x < side; ++x)
    c.fill(kMargin + x, kMargin + side + kBarGap, 1, kBarHeight, colour(static_cast<double>(x) / std::max(side - 1, 1u)));
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
