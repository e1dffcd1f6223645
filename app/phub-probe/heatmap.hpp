// PNG heatmap of the RTT matrix in planned order, with group boundaries and a colour bar.
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

// Hosts in ring order, excluded hosts last. Colour: log of the median RTT, dark = near, yellow = far;
// grey = missing pair, black = diagonal; white lines separate groups; a colour bar runs underneath.
[[nodiscard]] Image render_heatmap(const topo::Matrix& m, const topo::Plan& plan);

[[nodiscard]] Expected<void, std::string> write_png(const std::string& path, const Image& img);

}  // namespace phub::probe
