// One block's compression with ISA-L's igzip (raw deflate, level 1) and its inverse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace phub::persist {

class BlockCompressor {
 public:
  BlockCompressor();
  // Compresses `raw` into `out` (resized). Returns false when deflate would not be smaller: the caller
  // stores the block as it is.
  bool compress(std::span<const std::byte> raw, std::vector<std::byte>& out);

 private:
  std::vector<uint8_t> level_buf_;
};

// Inflates `stored` into exactly `raw.size()` bytes; false on any error or size mismatch.
[[nodiscard]] bool inflate_block(std::span<const std::byte> stored, std::span<std::byte> raw);

}  // namespace phub::persist
