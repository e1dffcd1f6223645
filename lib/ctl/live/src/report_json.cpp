// A counter sample as JSON (see report_json.hpp).
#include "phub/ctl/report_json.hpp"

#include "phub/base/ipv4.hpp"
#include "phub/base/json.hpp"

namespace phub::ctl {
namespace {

Json drops(const std::array<uint64_t, engine::kDropCount>& d) {
  Json out = Json::object();
  for (size_t i = 0; i < engine::kDropCount; ++i) out[engine::drop_name(static_cast<engine::Drop>(i))] = d[i];
  return out;
}

// phub messages by opcode name ("other": frames that are not phub messages).
Json messages(const std::array<uint64_t, engine::kOpcodeSlots>& n) {
  Json out = Json::object();
  for (size_t op = 0; op < engine::kOpcodeSlots; ++op) out[std::string(engine::message_slot_name(op))] = n[op];
  return out;
}

}  // namespace

std::string report_json(const CounterSample& s) {
  const auto& r = s.report;
  Json w;
  w["sample"] = s.sequence;
  w["taken_unix_ms"] = s.taken_unix_ms;
  w["tsc_hz"] = r.tsc_hz;
  Json& lcores = w["lcores"] = Json::array();
  engine::LcoreCounters sum;
  for (const auto& l : r.lcores) {
    engine::accumulate(sum, l.counters);
    Json& lc = lcores.emplace_back();
    lc["lcore"] = l.lcore_id;
    lc["index"] = l.index;
    for (const auto& f : engine::kLcoreFields) lc[f.name] = l.counters.*f.member;
    lc["loop_gaps_us"] = l.counters.loop_gaps;  // iterations per bucket: up to each bound, the last one beyond
    lc["drops"] = drops(l.counters.drops);
    lc["rx_messages"] = messages(l.counters.rx_messages);
    lc["tx_messages"] = messages(l.counters.tx_messages);
  }
  Json& jobs = w["jobs"] = Json::array();
  for (const auto& j : r.jobs) {
    Json& job = jobs.emplace_back();
    job["id"] = j.id;
    job["name"] = j.name;
    job["epoch"] = j.epoch;
    job["draining"] = j.draining;
    job["open_rounds"] = j.open_rounds;
    for (const auto& f : engine::kJobFields) job[f.name] = j.counters.*f.member;
    job["drops"] = drops(j.counters.drops);
    Json& hubs = job["hubs"] = Json::array();  // hierarchical jobs: each peer hub (docs/hierarchy.md)
    for (const auto& h : j.hubs) {
      Json& hub = hubs.emplace_back();
      hub["rack"] = h.rack;
      hub["ipv4"] = format_ipv4(h.ipv4);
      for (const auto& f : engine::kHubPeerFields) hub[f.name] = f.get(h);
      if (h.answer_age_ms != UINT64_MAX) hub["answer_age_ms"] = h.answer_age_ms;
      hub["fingerprint"] = h.fingerprint;
      hub["fingerprint_differs"] = h.fingerprint_differs;
    }
    job["round_latency_us"] = j.counters.round_latency;  // rounds per bucket: up to each bound, the last one beyond
    for (size_t d = 0; d < engine::kDropCount; ++d) sum.drops[d] += j.counters.drops[d];
  }
  w["loop_gap_bounds_us"] = engine::kGapBoundsUs;
  w["round_latency_bounds_us"] = engine::kLatencyBoundsUs;
  w["drops"] = drops(sum.drops);
  Json& malformed = w["malformed"] = Json::object();
  for (size_t e = 0; e < proto::kParseErrorCount; ++e) {
    malformed[proto::parse_error_name(static_cast<proto::ParseError>(e))] = sum.malformed[e];
  }
  Json& ports = w["ports"] = Json::array();
  for (const auto& p : r.ports) {
    Json port = {{"name", p.name}};
    for (const auto& f : drivers::kPortStatFields) port[std::string(f.name)] = p.stats.*f.member;
    ports.push_back(std::move(port));
  }
  Json& pools = w["pools"] = Json::array();
  for (const auto& p : r.pools) {
    pools.push_back({{"name", p.name}, {"size", p.size}, {"in_use", p.in_use}, {"avail", p.avail}});
  }
  return json_text(std::move(w));
}

}  // namespace phub::ctl
