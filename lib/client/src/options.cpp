// Parsing of server addresses and validation of the client settings.
#include "phub/client/options.hpp"

#include "phub/base/ipv4.hpp"
#include "phub/proto/frame.hpp"

namespace phub::client {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Unexpected<Error> bad(const std::string& field, const std::string& why) {
  return fail(PHUB_ERR_INVALID_ARGUMENT, "config." + field + ": " + why);
}

}  // namespace

Result<uint32_t> parse_address(std::string_view text) {
  auto a = parse_ipv4_address(trim(text));
  if (!a) return fail(PHUB_ERR_INVALID_ARGUMENT, a.error());
  return *a;
}

Result<std::vector<uint32_t>> parse_servers(std::string_view text) {
  std::vector<uint32_t> out;
  while (true) {
    const size_t comma = text.find(',');
    auto ip = parse_address(text.substr(0, comma));
    if (!ip) return fail(PHUB_ERR_INVALID_ARGUMENT, "config.servers: " + ip.error().message);
    out.push_back(*ip);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

Expected<void, Error> validate(const Options& o) {
  if (o.servers.empty()) return bad("servers", "at least one server address is needed");
  if (o.servers.size() > 256) return bad("servers", "at most 256 servers");
  if (o.server_lcores == 0 || o.server_lcores > 256) return bad("server_lcores", "must be 1..256");
  if (o.port_base == 0) return bad("port_base", "must be set (the job's port_base)");
  if (uint32_t{o.port_base} + o.server_lcores - 1 > 65535) return bad("port_base", "port_base + server_lcores exceeds 65535");
  if (o.job_id == 0) return bad("job_id", "must be 1..2^32-1");
  if (o.workers == 0 || o.workers > 1024) return bad("workers", "must be 1..1024");
  if (o.rank >= o.workers) return bad("rank", "must be below workers (" + std::to_string(o.workers) + ")");
  if (o.chunk_bytes < 1024 || o.chunk_bytes > (1u << 20) || o.chunk_bytes % 64 != 0) {
    return bad("chunk_bytes", "must be a multiple of 64 in 1 KiB..1 MiB");
  }
  if (o.mtu < 576 || o.mtu > 9000) return bad("mtu", "must be 576..9000");
  if (!dtype_valid(static_cast<uint8_t>(o.dtype))) return bad("dtype", "must be fp32, fp16 or bf16");
  if (proto::job_segment_elems(o.mtu, o.dtype, o.mode == Mode::ps) == 0) return bad("mtu", "leaves no room for elements");
  if (o.round_modulus == 1) return bad("round_modulus", "must be 0 or at least 2");
  if (o.timeout_ms == 0) return bad("timeout_ms", "must be at least 1");
  if (o.rto_min_us == 0) return bad("rto_min_us", "must be at least 1");
  if (o.rto_min_us > o.rto_initial_us || o.rto_initial_us > o.rto_max_us) {
    return bad("rto_initial_us", "need rto_min_us <= rto_initial_us <= rto_max_us");
  }
  if (o.window_packets < kMinWindowPackets || o.window_packets > 65536) {
    return bad("window_packets", "must be " + std::to_string(kMinWindowPackets) + "..65536");
  }
  if (o.delay_target_us > 1000000) return bad("delay_target_us", "must be 0..1000000 (0: loss-based window)");
  if (o.socket_buffer_bytes < 65536) return bad("socket_buffer_bytes", "must be at least 64 KiB");
  const Faults& f = o.faults;
  for (uint32_t ppm : {f.drop_tx_ppm, f.drop_rx_ppm, f.dup_tx_ppm, f.reorder_tx_ppm}) {
    if (ppm > 1000000) return bad("fault_*_ppm", "must be 0..1000000");
  }
  return {};
}

}  // namespace phub::client
