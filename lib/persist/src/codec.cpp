#include "codec.hpp"

#include <isa-l/igzip_lib.h>

#include <climits>

namespace phub::persist {

BlockCompressor::BlockCompressor() : level_buf_(ISAL_DEF_LVL1_DEFAULT) {}

bool BlockCompressor::compress(std::span<const std::byte> raw, std::vector<std::byte>& out) {
  if (raw.empty() || raw.size() > UINT32_MAX) return false;
  out.resize(raw.size());  // not smaller than the input: not worth it
  isal_zstream s;
  isal_deflate_stateless_init(&s);
  s.level = 1;
  s.level_buf = level_buf_.data();
  s.level_buf_size = static_cast<uint32_t>(level_buf_.size());
  s.end_of_stream = 1;
  s.flush = NO_FLUSH;
  s.gzip_flag = 0;
  s.next_in = reinterpret_cast<uint8_t*>(const_cast<std::byte*>(raw.data()));  // igzip does not write it
  s.avail_in = static_cast<uint32_t>(raw.size());
  s.next_out = reinterpret_cast<uint8_t*>(out.data());
  s.avail_out = static_cast<uint32_t>(out.size());
  if (isal_deflate_stateless(&s) != COMP_OK) return false;
  out.resize(s.total_out);
  return s.total_out < raw.size();
}

bool inflate_block(std::span<const std::byte> stored, std::span<std::byte> raw) {
  if (stored.size() > UINT32_MAX || raw.size() > UINT32_MAX) return false;
  inflate_state s;
  isal_inflate_init(&s);
  s.crc_flag = ISAL_DEFLATE;
  s.next_in = reinterpret_cast<uint8_t*>(const_cast<std::byte*>(stored.data()));
  s.avail_in = static_cast<uint32_t>(stored.size());
  s.next_out = reinterpret_cast<uint8_t*>(raw.data());
  s.avail_out = static_cast<uint32_t>(raw.size());
  int rc = isal_inflate_stateless(&s);
  return rc == ISAL_DECOMP_OK && s.avail_out == 0 && s.avail_in == 0;
}

}  // namespace phub::persist
