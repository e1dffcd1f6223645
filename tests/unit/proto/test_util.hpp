// Helpers shared by the proto tests: byte buffers and a sample header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "phub/proto/frame.hpp"
#include "phub/proto/header.hpp"

namespace phub::proto::test {

inline std::vector<std::byte> bytes_of(size_t n, uint8_t seed = 1) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

inline Header sample_header(uint16_t elem_count = 8, Dtype d = Dtype::fp32) {
  Header h;
  h.opcode = Opcode::push;
  h.dtype = d;
  h.job_id = 0x01020304;
  h.rank = 7;
  h.round = 0xa0b0c0d0;
  h.chunk_id = 42;
  h.elem_offset = 352;
  h.elem_count = elem_count;
  h.aux = 0x11223344;
  h.seq = 99;
  return h;
}

inline FlowAddrs sample_addrs() {
  FlowAddrs a;
  a.src_mac = {0x02, 0, 0, 0, 0, 1};
  a.dst_mac = {0x02, 0, 0, 0, 0, 2};
  a.src_ip = 0xc6120002;  // 198.18.0.2
  a.dst_ip = 0xc6120001;  // 198.18.0.1
  a.src_port = 33333;
  a.dst_port = 40001;
  return a;
}

}  // namespace phub::proto::test
