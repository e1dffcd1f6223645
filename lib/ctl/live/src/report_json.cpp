// A counter sample as JSON (see report_json.hpp).
#include "phub/ctl/report_json.hpp"

#include "phub/base/ipv4.hpp"
#include "phub/base/json_writer.hpp"

namespace phub::ctl {
namespace {

void drops(JsonWriter& w, const std::array<uint64_t, engine::kDropCount>& d) {
  w.begin_object("drops");
  for (size_t i = 0; i < engine::kDropCount; ++i) w.value(engine::drop_name(static_cast<engine::Drop>(i)), d[i]);
  w.end_object();
}

// phub messages by opcode name ("other": frames that are not phub messages).
void messages(JsonWriter& w, std::string_view key, const std::array<uint64_t, engine::kOpcodeSlots>& n) {
  w.begin_object(key);
  for (size_t op = 0; op < engine::kOpcodeSlots; ++op) w.value(engine::message_slot_name(op), n[op]);
  w.end_object();
}

}  // namespace

std::string report_json(const CounterSample& s) {
  const auto& r = s.report;
  JsonWriter w;
  w.begin_object();
  w.value("sample", s.sequence);
  w.value("taken_unix_ms", s.taken_unix_ms);
  w.value("tsc_hz", r.tsc_hz);
  w.begin_array("lcores");
  engine::LcoreCounters sum;
  for (const auto& l : r.lcores) {
    engine::accumulate(sum, l.counters);
    w.begin_object();
    w.value("lcore", l.lcore_id);
    w.value("index", l.index);
    for (const auto& f : engine::kLcoreFields) w.value(f.name, l.counters.*f.member);
    w.begin_array("loop_gaps_us", true);  // iterations per bucket: up to each bound, the last one beyond
    for (uint64_t n : l.counters.loop_gaps) w.item(n);
    w.end_array();
    drops(w, l.counters.drops);
    messages(w, "rx_messages", l.counters.rx_messages);
    messages(w, "tx_messages", l.counters.tx_messages);
    w.end_object();
  }
  w.end_array();
  w.begin_array("jobs");
  for (const auto& j : r.jobs) {
    w.begin_object();
    w.value("id", j.id);
    w.value("name", j.name);
    w.value("epoch", j.epoch);
    w.value("draining", j.draining);
    w.value("open_rounds", j.open_rounds);
    for (const auto& f : engine::kJobFields) w.value(f.name, j.counters.*f.member);
    drops(w, j.counters.drops);
    w.begin_array("hubs");  // hierarchical jobs: each peer hub (docs/hierarchy.md)
    for (const auto& h : j.hubs) {
      w.begin_object();
      w.value("rack", h.rack);
      w.value("ipv4", format_ipv4(h.ipv4));
      for (const auto& f : engine::kHubPeerFields) w.value(f.name, f.get(h));
      if (h.answer_age_ms != UINT64_MAX) w.value("answer_age_ms", h.answer_age_ms);
      w.value("fingerprint", h.fingerprint);
      w.begin_array("fingerprint_differs", true);
      for (const auto& c : h.fingerprint_differs) w.item(c);
      w.end_array();
      w.end_object();
    }
    w.end_array();
    w.begin_array("round_latency_us", true);  // rounds per bucket: up to each bound, the last one beyond
    for (uint64_t n : j.counters.round_latency) w.item(n);
    w.end_array();
    w.end_object();
    for (size_t d = 0; d < engine::kDropCount; ++d) sum.drops[d] += j.counters.drops[d];
  }
  w.end_array();
  w.begin_array("loop_gap_bounds_us", true);
  for (uint64_t b : engine::kGapBoundsUs) w.item(b);
  w.end_array();
  w.begin_array("round_latency_bounds_us", true);
  for (uint64_t b : engine::kLatencyBoundsUs) w.item(b);
  w.end_array();
  drops(w, sum.drops);
  w.begin_object("malformed");
  for (size_t e = 0; e < proto::kParseErrorCount; ++e) {
    w.value(proto::parse_error_name(static_cast<proto::ParseError>(e)), sum.malformed[e]);
  }
  w.end_object();
  w.begin_array("ports");
  for (const auto& p : r.ports) {
    w.begin_object();
    w.value("name", p.name);
    w.value("rx_packets", p.stats.rx_packets);
    w.value("rx_bytes", p.stats.rx_bytes);
    w.value("rx_missed", p.stats.rx_missed);
    w.value("rx_errors", p.stats.rx_errors);
    w.value("rx_nombuf", p.stats.rx_nombuf);
    w.value("tx_packets", p.stats.tx_packets);
    w.value("tx_bytes", p.stats.tx_bytes);
    w.value("tx_errors", p.stats.tx_errors);
    w.end_object();
  }
  w.end_array();
  w.begin_array("pools");
  for (const auto& p : r.pools) {
    w.begin_object();
    w.value("name", p.name);
    w.value("size", p.size);
    w.value("in_use", p.in_use);
    w.value("avail", p.avail);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.str();
}

}  // namespace phub::ctl
