// describe(): a few human-readable lines that summarise a config, for logs.
#include <numeric>

#include "phub/base/ipv4.hpp"
#include "phub/config/load.hpp"
#include "phub/config/text.hpp"

namespace phub::config {
namespace {

std::string join_names(const std::vector<std::string>& names, std::string_view none) {
  if (names.empty()) return std::string(none);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::string describe_job(const Job& j, size_t nlcores) {
  uint64_t elems = std::accumulate(j.keys.begin(), j.keys.end(), uint64_t{0},
                                   [](uint64_t sum, const Key& k) { return sum + k.elems; });
  std::string s = "job " + std::to_string(j.id) + " " + j.name + ": " + std::string(mode_name(j.mode));
  if (j.mode == JobMode::allreduce) s += " " + std::string(reduce_name(j.reduce));
  if (j.mode == JobMode::ps) s += " " + std::string(optimizer_name(j.optimizer.kind));
  s.append(" ").append(dtype_name(j.dtype)).append(j.deterministic ? " deterministic" : "");
  s += j.nonfinite == Nonfinite::refuse ? ", non-finite refused" : ", non-finite passed";
  s += ", " + std::to_string(j.workers) + " workers, " + std::to_string(j.keys.size()) + " keys " +
       std::to_string(elems) + " elems, chunk " + format_size(j.chunk_bytes);
  s += ", udp " + std::to_string(j.port_base) + ".." + std::to_string(j.port_base + std::max<size_t>(nlcores, 1) - 1);
  s += ", quota " + format_size(j.quota_bytes) + (j.secret.empty() ? ", no auth" : ", auth") + (j.insecure ? " (insecure)" : "") +
       (j.sessions ? (j.payload_mac ? ", sessions with payload MAC" : ", sessions") : "");
  if (j.interface_map) s += ", chunks sent to their lcore's port";
  if (j.rate_limit_pps != 0) s += ", " + std::to_string(j.rate_limit_pps) + " pps max";
  if (j.answer_bytes_per_s != 0) s += ", answers " + std::to_string(j.answer_bytes_per_s) + " B/s max";
  if (!j.allowed_sources.empty()) s += ", " + std::to_string(j.allowed_sources.size()) + " source prefixes";
  if (j.checkpoint.enabled()) {
    s += ", checkpoints in " + j.checkpoint.dir;
    if (j.checkpoint.every_rounds != 0) s += " every " + std::to_string(j.checkpoint.every_rounds) + " rounds";
    if (j.checkpoint.every_s != 0) s += " every " + std::to_string(j.checkpoint.every_s) + " s";
    s += " (keep " + std::to_string(j.checkpoint.keep) + ")";
  }
  return s;
}

}  // namespace

std::string describe(const Config& c) {
  std::string s = std::to_string(c.ports.size()) + " ports, " + std::to_string(c.lcores.size()) + " lcores, " +
                  std::to_string(c.jobs.size()) + " jobs, " +
                  (c.racks.empty() ? std::string("no racks")
                                   : std::to_string(c.racks.size()) + " racks (this is " + c.rack + ")");
  for (const Port& p : c.ports) {
    s += "\n  port " + p.name + ": " + p.device + " " + format_ipv4_prefix(p.ipv4) + " mtu " + std::to_string(p.mtu) +
         " steering " + std::string(steering_name(p.steering)) +
         (p.udp_checksum == UdpChecksum::trust ? " udp_checksum trust" : "");
  }
  s += "\n  lcores:";
  for (const Lcore& l : c.lcores) {
    s.append(" ").append(std::to_string(l.id)).append("[" + join_names(l.ports, "all") + "]");
    if (l.cross_socket) s += "(cross_socket)";
  }
  if (c.polling.idle_polls_before_sleep == 0) {
    s += ", busy-poll";
  } else {
    s += ", sleep " + std::to_string(c.polling.idle_sleep_us) + " us after " +
         std::to_string(c.polling.idle_polls_before_sleep) + " empty polls";
  }
  for (const Job& j : c.jobs) s += "\n  " + describe_job(j, c.lcores.size());
  s += "\n  limits: memory " + format_size(c.limits.memory_bytes) + ", " + std::to_string(c.limits.mbufs) +
       " mbufs/port, control " + c.control.socket_path;
  return s;
}

}  // namespace phub::config
