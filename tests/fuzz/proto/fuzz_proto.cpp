// libFuzzer target: every frame parser of lib/proto, plus build/parse round trips of what parses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "phub/proto/arp_icmp.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"
#include "phub/proto/hub_state.hpp"

using namespace phub::proto;

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

void round_trip(const PhubFrame& f) {
  FlowAddrs a;
  a.src_mac = f.l2.src;
  a.dst_mac = f.l2.dst;
  a.src_ip = f.ip.src;
  a.dst_ip = f.ip.dst;
  a.src_port = f.udp.src_port;
  a.dst_port = f.udp.dst_port;
  std::vector<std::byte> out(kFrameHeadersBytes + f.payload.size());
  auto n = build_phub_frame(a, f.hdr, f.payload, out);
  check(n.has_value() && *n == out.size());
  auto again = parse_phub_frame(out);
  check(again.has_value());
  check(again->hdr == f.hdr);
  check(again->payload.size() == f.payload.size());
  check(std::memcmp(again->payload.data(), f.payload.data(), f.payload.size()) == 0);
}

// A parsed hub forward: whatever it carries, its MAC check terminates, and sealing it makes it verify
// (and still parse) while any other payload fails.
void forward(const PhubFrame& f, std::span<const std::byte> msg) {
  static const AuthKey key = derive_key("fuzz", 1);
  static const AuthKey payload_key = fwd_payload_key(key);
  (void)verify_fwd(key, payload_key, msg.first<kHeaderBytes>(), f.payload);
  std::vector<std::byte> sealed(msg.begin(), msg.end());
  auto wire = std::span(sealed).first<kHeaderBytes>();
  seal_fwd(key, payload_key, wire, std::span(sealed).subspan(kHeaderBytes));
  check(verify_fwd(key, payload_key, wire, std::span(sealed).subspan(kHeaderBytes)));
  check(parse_header(sealed).has_value());
  if (!f.payload.empty()) {
    sealed.back() ^= std::byte{1};
    check(!verify_fwd(key, payload_key, wire, std::span(sealed).subspan(kHeaderBytes)));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly sized heap buffer so that ASan catches any read past the end.
  std::vector<std::byte> frame(size);
  if (size != 0) std::memcpy(frame.data(), data, size);

  auto whole = parse_phub_frame(frame);
  if (whole) {
    round_trip(*whole);
    if (whole->hdr.opcode == Opcode::hub_state) {
      // What parses as a hub_state has a payload that parses and writes back byte for byte.
      auto s = parse_hub_state(whole->payload);
      check(s.has_value());
      std::array<std::byte, kHubStateBytes> again{};
      write_hub_state(*s, again);
      check(std::memcmp(again.data(), whole->payload.data(), kHubStateBytes) == 0);
    }
    if (opcode_is_hub(whole->hdr.opcode)) {
      forward(*whole, std::span<const std::byte>(frame).subspan(whole->udp.payload_offset,
                                                                 kHeaderBytes + whole->payload.size()));
    }
  }
  (void)parse_phub_frame(frame, false);
  (void)parse_header(frame);

  auto l2 = parse_l2(frame);
  if (!l2) return 0;
  if (auto arp = parse_arp(frame, *l2)) {
    std::array<std::byte, kArpFrameBytes> reply{};
    (void)build_arp_reply(*arp, phub::MacAddr{2, 0, 0, 0, 0, 1}, 0xc6120001, reply);
  }
  auto ip = parse_ipv4(frame, *l2, false);
  if (!ip) return 0;
  if (auto echo = parse_icmp_echo_request(frame, *ip)) {
    icmp_echo_reply_in_place(frame, *l2, *ip, *echo);
    auto rl2 = parse_l2(frame);
    check(rl2.has_value());
  }
  if (auto udp = parse_udp(frame, *ip)) {
    const auto msg = std::span<const std::byte>(frame).subspan(udp->payload_offset, udp->payload_bytes);
    if (msg.size() >= kHeaderBytes) (void)verify_header(derive_key("fuzz", 1), msg.first<kHeaderBytes>());
  }
  return 0;
}
