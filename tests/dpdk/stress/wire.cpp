// Worker addresses, frames and reading what the server sent (see wire.hpp).
#include "wire.hpp"

#include <cstring>
#include <stdexcept>

#include "harness.hpp"
#include "phub/proto/handshake.hpp"
#include "phub/proto/session.hpp"

namespace phub::stress {

RankAddress rank_address(uint32_t job, uint16_t rank) noexcept {
  RankAddress a{};
  a.mac = {0x02, 0x77, static_cast<uint8_t>(job), 0, static_cast<uint8_t>(rank >> 8), static_cast<uint8_t>(rank)};
  a.ip = (198U << 24) | (18U << 16) | ((16U + job) << 8) | (rank + 1U);
  a.udp_port = static_cast<uint16_t>(50000 + 100 * job + rank);
  return a;
}

std::vector<std::byte> worker_frame(const RankAddress& from, MacAddr server_mac, uint16_t server_udp_port,
                                    const proto::Header& h, std::span<const std::byte> payload,
                                    const proto::AuthKey* key) {
  proto::FlowAddrs a;
  a.src_mac = from.mac;
  a.dst_mac = server_mac;
  a.src_ip = from.ip;
  a.dst_ip = test::kServerIp;
  a.src_port = from.udp_port;
  a.dst_port = server_udp_port;
  // A join (protocol v3) carries the 44-byte handshake payload, a nonce fixed by the rank, and is sealed
  // with the handshake key over header and payload.
  const bool join = h.opcode == proto::Opcode::join;
  std::vector<std::byte> join_body;
  if (join && payload.empty()) {
    proto::JoinPayload p;
    for (size_t i = 0; i < p.worker_nonce.size(); ++i) {
      p.worker_nonce[i] = static_cast<std::byte>(((h.job_id + h.rank * 131u + h.aux) >> (i % 4 * 8)) ^ (0xa5 + i));
    }
    join_body.resize(proto::kJoinPayloadBytes);
    proto::write_join_payload(p, std::span<std::byte, proto::kJoinPayloadBytes>(join_body.data(), join_body.size()));
    payload = join_body;
  }
  std::vector<std::byte> frame(proto::kFrameHeadersBytes + payload.size());
  if (!proto::build_phub_frame(a, h, payload, frame)) throw std::logic_error("worker_frame: build_phub_frame failed");
  if (key != nullptr) {
    auto msg = std::span(frame).subspan(proto::kFrameHeadersBytes - proto::kHeaderBytes);
    if (join) {
      proto::seal_handshake(proto::handshake_key(*key), msg.first<proto::kHeaderBytes>(), msg.subspan(proto::kHeaderBytes));
    } else {
      proto::sign_header(*key, msg.first<proto::kHeaderBytes>());
    }
    proto::refresh_udp_checksum(frame);  // the tag changed bytes under the UDP checksum
  }
  return frame;
}

void read_frame(const rte_mbuf* m, std::vector<std::byte>& out) {
  out.resize(m->pkt_len);
  const void* data = rte_pktmbuf_read(m, 0, m->pkt_len, out.data());
  if (data != out.data()) std::memcpy(out.data(), data, out.size());
}

}  // namespace phub::stress
