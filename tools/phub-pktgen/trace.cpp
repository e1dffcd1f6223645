// Writing replayable traces and verifying a server's recorded results.
#include "trace.hpp"

#include <array>
#include <cstdio>
#include <memory>
#include <vector>

#include "phub/gen/pcap.hpp"
#include "phub/gen/push_frame.hpp"
#include "phub/gen/verifier.hpp"
#include "phub/proto/frame.hpp"

namespace phub::pktgen {
namespace {

struct TraceJob {
  gen::Workload wl;
  std::unique_ptr<gen::SlotMap> slots;
  gen::WorkerAddrs addrs;
};

Expected<std::vector<TraceJob>, std::string> trace_jobs(const Target& t, uint32_t worker_ip, const MacAddr& src) {
  std::vector<TraceJob> jobs;
  uint32_t next_ip = worker_ip != 0 ? worker_ip : (t.server_ip & 0xffffff00u) + 100;
  for (const auto& tj : t.jobs) {
    if (tj.spec.sessions && !tj.spec.secret.empty()) {
      // A session packet is sealed under keys that only a join makes, with a number the server takes once: a
      // trace is a replay by design, which such a job refuses.
      return unexpected("job '" + tj.spec.name + "' (id " + std::to_string(tj.spec.id) +
                        ") runs sessions: a trace cannot carry session packets (each is sealed under a join's keys "
                        "and taken once); trace a job with sessions = false, insecure = true (--jobs picks jobs)");
    }
    auto wl = gen::Workload::build(tj.spec, t.mtu);
    if (!wl) return unexpected(wl.error());
    TraceJob j{std::move(*wl), nullptr, {}};
    j.slots = std::make_unique<gen::SlotMap>(j.wl, std::span<const uint16_t>{});
    j.addrs.src_mac = src;
    j.addrs.server_mac = t.server_mac.value_or(kBroadcastMac);
    j.addrs.server_ip = t.server_ip;
    next_ip = first_worker_ip(tj, next_ip, worker_ip != 0);
    j.addrs.ip_base = next_ip;
    j.addrs.rank_ips = tj.rank_ips;
    next_ip += tj.spec.workers;
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace

Expected<Record, std::string> write_trace(const Target& t, const TraceOptions& o) {
  auto jobs = trace_jobs(t, o.worker_ip, o.src_mac);
  if (!jobs) return unexpected(jobs.error());
  auto w = gen::PcapWriter::create(o.path);
  if (!w) return unexpected(w.error());
  std::vector<std::byte> frame(16384);
  uint64_t ts_us = 0, bytes = 0;
  uint32_t seq = 0;
  std::array<uint64_t, size_t{proto::kOpcodeMax} + 1> written{};  // frames by the opcode they carry
  auto put = [&](TraceJob& j, uint32_t slot, const gen::PushOrder& order) -> Expected<void, std::string> {
    const size_t len = gen::write_push_frame(j.wl, j.addrs, (*j.slots)[slot], order, seq++, frame);
    bytes += len;
    auto f = proto::parse_phub_frame(std::span<const std::byte>(frame.data(), len));
    if (!f) return unexpected("pktgen: a trace frame does not parse: " + std::string(proto::parse_error_name(f.error())));
    ++written[static_cast<size_t>(f->hdr.opcode)];
    return w->write(std::span(frame.data(), len), ts_us++);
  };
  for (auto& j : *jobs) {  // ps: rank 0's initial weights first
    if (j.wl.spec().mode != gen::Mode::ps) continue;
    for (uint32_t s = 0; s < j.slots->size(); ++s) {
      if (auto r = put(j, s, gen::PushOrder{0, s, 0, true, false, false}); !r) return unexpected(r.error());
    }
  }
  for (uint32_t round = 0; round < o.rounds; ++round) {
    for (auto& j : *jobs) {
      for (uint32_t s = 0; s < j.slots->size(); ++s) {
        for (uint16_t rank = 0; rank < j.wl.spec().workers; ++rank) {
          if (auto r = put(j, s, gen::PushOrder{rank, s, round, false, false, false}); !r) return unexpected(r.error());
        }
      }
    }
  }
  if (auto r = w->close(); !r) return unexpected(r.error());
  Record rec;
  rec.set("path", o.path);
  rec.set("frames", static_cast<double>(w->frames()));
  rec.set("bytes", static_cast<double>(bytes));
  rec.set("rounds", static_cast<double>(o.rounds));
  auto opcodes = object();  // what the file holds, counted frame by frame as written (e.g. for tshark)
  for (size_t op = proto::kOpcodeMin; op < written.size(); ++op) {
    if (written[op] != 0) opcodes->set(std::string(proto::opcode_name(static_cast<proto::Opcode>(op))), static_cast<double>(written[op]));
  }
  rec.set("opcodes", opcodes);
  auto expect = list();
  for (const auto& j : *jobs) {
    const gen::JobSpec& s = j.wl.spec();
    auto e = object();
    e->set("id", static_cast<double>(s.id));
    e->set("name", s.name);
    e->set("pushes", static_cast<double>(uint64_t{o.rounds} * s.workers * j.slots->size()));
    e->set("rounds_completed", static_cast<double>(uint64_t{o.rounds} * j.wl.layout().chunk_count()));
    e->set("results_sent", static_cast<double>(uint64_t{o.rounds} * s.workers * j.slots->size()));
    e->set("inits", static_cast<double>(s.mode == gen::Mode::ps ? j.slots->size() : 0));
    if (s.round_modulus != o.rounds) {
      std::fprintf(stderr, "pktgen: note: job %u has round_modulus %u; a looped replay of this %u-round trace "
                   "needs round_modulus = %u\n", s.id, s.round_modulus, o.rounds, o.rounds);
    }
    expect->push(e);
  }
  rec.set("expect", expect);
  return rec;
}

Expected<Record, std::string> verify_trace(const Target& t, const std::string& path) {
  auto jobs = trace_jobs(t, 0, MacAddr{});
  if (!jobs) return unexpected(jobs.error());
  auto file = gen::read_pcap(path);
  if (!file) return unexpected(file.error());
  std::vector<gen::Verifier> verifiers;
  std::vector<std::vector<bool>> init_seen;
  for (auto& j : *jobs) {
    verifiers.emplace_back(j.wl, *j.slots);
    init_seen.emplace_back(j.slots->size(), false);
  }
  uint64_t results = 0, ok = 0, mismatches = 0, unverifiable = 0, init_acks = 0, errors = 0, other = 0;
  for (const auto& fr : file->frames) {
    auto f = proto::parse_phub_frame(fr.data);
    size_t j = 0;
    while (f && j < jobs->size() && (*jobs)[j].wl.spec().id != f->hdr.job_id) ++j;
    if (!f || j == jobs->size()) {
      ++other;
      continue;
    }
    if (f->hdr.opcode == proto::Opcode::error) {
      ++errors;
      continue;
    }
    const int64_t slot = (*jobs)[j].slots->find(f->hdr.chunk_id, f->hdr.elem_offset);
    if (f->hdr.opcode != proto::Opcode::result || slot < 0) {
      ++other;
      continue;
    }
    ++results;
    gen::Check c;
    const bool ps = (*jobs)[j].wl.spec().mode == gen::Mode::ps;
    if (ps && f->hdr.rank == 0 && f->hdr.round == (*jobs)[j].wl.init_ack_round() &&
        !init_seen[j][static_cast<size_t>(slot)]) {
      init_seen[j][static_cast<size_t>(slot)] = true;
      ++init_acks;
      c = verifiers[j].check_init_ack(static_cast<uint32_t>(slot), f->payload);
    } else {
      c = verifiers[j].check_result(f->hdr.rank, static_cast<uint32_t>(slot), f->hdr.round, f->payload);
    }
    (c == gen::Check::ok ? ok : c == gen::Check::mismatch ? mismatches : unverifiable) += 1;
  }
  Record rec;
  rec.set("path", path);
  rec.set("frames", static_cast<double>(file->frames.size()));
  rec.set("results", static_cast<double>(results));
  rec.set("results_ok", static_cast<double>(ok));
  rec.set("init_acks", static_cast<double>(init_acks));
  rec.set("mismatches", static_cast<double>(mismatches));
  rec.set("unverifiable", static_cast<double>(unverifiable));
  rec.set("errors", static_cast<double>(errors));
  rec.set("other_frames", static_cast<double>(other));
  auto examples = list();
  for (size_t j = 0; j < verifiers.size(); ++j) {
    for (const auto& m : verifiers[j].mismatches()) examples->push(m.describe((*jobs)[j].wl.spec().id));
  }
  rec.set("mismatch_examples", examples);
  return rec;
}

}  // namespace phub::pktgen
