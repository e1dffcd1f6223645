// The hierarchy fingerprint: canonical encodings of what hubs must agree on, hashed per component.
#include "phub/engine/hierarchy.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "phub/base/ipv4.hpp"
#include "phub/proto/auth.hpp"
#include "phub/proto/frame.hpp"

namespace phub::engine {
namespace {

// A canonical byte encoding: fixed-width little-endian numbers, strings with their length first.
class Encoder {
 public:
  void u64(uint64_t v) {
    std::byte b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<std::byte>(v >> (8 * i));
    bytes_.insert(bytes_.end(), b, b + 8);
  }
  void f32(float v) { u64(std::bit_cast<uint32_t>(v)); }
  void text(std::string_view s) {
    u64(s.size());
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    bytes_.insert(bytes_.end(), p, p + s.size());
  }
  // SipHash-2-4 under a fixed public key, one per component (the hash names its component).
  [[nodiscard]] uint64_t hash(HubFingerprint::Component c) const {
    return proto::siphash24(proto::AuthKey{0x7068756266703000ull, c}, bytes_);
  }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace

std::string_view fingerprint_component_name(HubFingerprint::Component c) noexcept {
  switch (c) {
    case HubFingerprint::racks: return "racks (names, hub addresses and hub UDP ports, in order)";
    case HubFingerprint::ranks: return "ranks_by_rack";
    case HubFingerprint::layout: return "the chunk map (job id, workers, dtype, keys, chunk_bytes, lcores, MTU's segment size, shards)";
    case HubFingerprint::arithmetic: return "the arithmetic (mode, reduce, deterministic, round_modulus)";
    case HubFingerprint::optimizer: return "the optimizer";
    case HubFingerprint::count_: break;
  }
  return "unknown";
}

std::string_view fingerprint_component_key(HubFingerprint::Component c) noexcept {
  switch (c) {
    case HubFingerprint::racks: return "racks";
    case HubFingerprint::ranks: return "ranks_by_rack";
    case HubFingerprint::layout: return "layout";
    case HubFingerprint::arithmetic: return "arithmetic";
    case HubFingerprint::optimizer: return "optimizer";
    case HubFingerprint::count_: break;
  }
  return "unknown";
}

HubFingerprint hub_fingerprint(const config::Config& cfg, const JobPlan& plan) {
  const config::Job& j = plan.cfg;
  HubFingerprint f;

  Encoder racks;
  racks.u64(cfg.racks.size());
  for (const config::Rack& r : cfg.racks) {
    racks.text(r.name);
    racks.u64(r.hub_ipv4);
    racks.u64(r.hub_port_base != 0 ? r.hub_port_base : j.port_base);
  }
  f.parts[HubFingerprint::racks] = racks.hash(HubFingerprint::racks);

  Encoder ranks;
  for (const config::Rack& r : cfg.racks) {
    auto it = std::find_if(j.ranks_by_rack.begin(), j.ranks_by_rack.end(),
                           [&](const auto& entry) { return entry.first == r.name; });
    std::vector<uint16_t> in_rack;
    if (it != j.ranks_by_rack.end()) in_rack = it->second;
    std::sort(in_rack.begin(), in_rack.end());  // the rack sums its ranks in increasing order however listed
    ranks.u64(in_rack.size());
    for (uint16_t rank : in_rack) ranks.u64(rank);
  }
  f.parts[HubFingerprint::ranks] = ranks.hash(HubFingerprint::ranks);

  Encoder layout;
  layout.u64(j.id);
  layout.u64(j.workers);
  layout.u64(static_cast<uint64_t>(j.dtype));
  layout.u64(j.keys.size());
  for (const config::Key& k : j.keys) layout.u64(k.elems);
  layout.u64(j.chunk_bytes);
  layout.u64(plan.lcores);
  layout.u64(plan.math.segment_elems);
  layout.u64(j.shard_count);
  f.parts[HubFingerprint::layout] = layout.hash(HubFingerprint::layout);

  Encoder arithmetic;
  arithmetic.u64(static_cast<uint64_t>(j.mode));
  arithmetic.u64(static_cast<uint64_t>(j.reduce));
  arithmetic.u64(j.deterministic ? 1 : 0);
  arithmetic.u64(j.round_modulus);
  f.parts[HubFingerprint::arithmetic] = arithmetic.hash(HubFingerprint::arithmetic);

  Encoder optimizer;
  const config::Optimizer& o = j.optimizer;
  optimizer.u64(j.mode == config::JobMode::ps ? 1 : 0);
  if (j.mode == config::JobMode::ps) {  // only a ps job runs it
    optimizer.u64(static_cast<uint64_t>(o.kind));
    for (float v : {o.lr, o.momentum, o.beta1, o.beta2, o.eps, o.weight_decay}) optimizer.f32(v);
    optimizer.u64(o.adamw ? 1 : 0);
  }
  f.parts[HubFingerprint::optimizer] = optimizer.hash(HubFingerprint::optimizer);
  return f;
}

std::vector<std::string> fingerprint_differences(const HubFingerprint& mine, const HubFingerprint& theirs) {
  std::vector<std::string> out;
  for (size_t i = 0; i < HubFingerprint::kComponents; ++i) {
    if (mine.parts[i] == theirs.parts[i]) continue;
    out.push_back(std::string(fingerprint_component_name(static_cast<HubFingerprint::Component>(i))) + " differs");
  }
  return out;
}

Expected<HubPlan, std::string> plan_hierarchy(const config::Config& cfg, const JobPlan& plan, uint16_t mtu) {
  const config::Job& j = plan.cfg;
  if (cfg.racks.empty()) return unexpected(job_label(j) + ": the config has no racks");
  if (!plan.authenticated) {
    return unexpected(job_label(j) + ".secret: required when racks are set (hub forwards are authenticated with it)");
  }
  if (j.shard_count != 1) {
    return unexpected(job_label(j) + ".shard: a job cannot be both sharded and spread over racks");
  }
  HubPlan h;
  const auto self = std::find_if(cfg.racks.begin(), cfg.racks.end(), [&](const config::Rack& r) { return r.name == cfg.rack; });
  if (self == cfg.racks.end()) return unexpected("rack: \"" + cfg.rack + "\" is not one of racks[].name");
  h.my_rack = static_cast<uint16_t>(self - cfg.racks.begin());
  if (self->hub_port_base != 0 && self->hub_port_base != j.port_base) {
    return unexpected("racks[" + std::to_string(h.my_rack + 1) + "].hub_port_base: " + job_label(j) +
                      " listens on port_base " + std::to_string(j.port_base) +
                      " on this hub, where the other hubs send its forwards; set them equal, or 0");
  }
  for (size_t i = 0; i < cfg.racks.size(); ++i) {
    const config::Rack& r = cfg.racks[i];
    HubPlan::Hub hub{r.hub_ipv4, r.hub_port_base != 0 ? r.hub_port_base : j.port_base, 0};
    const auto port = std::find_if(cfg.ports.begin(), cfg.ports.end(), [&](const config::Port& p) {
      const uint32_t mask = ipv4_netmask(p.ipv4.prefix_len);
      return (p.ipv4.addr & mask) == (r.hub_ipv4 & mask);
    });
    if (port == cfg.ports.end() && i != h.my_rack) {
      return unexpected("racks[" + std::to_string(i + 1) + "].hub_ipv4: no port's subnet holds it (hubs send " +
                        "forwards to each other's addresses directly, not through a router)");
    }
    if (port != cfg.ports.end()) hub.port = static_cast<uint16_t>(port - cfg.ports.begin());
    h.hubs.push_back(hub);
  }

  // Validation made every rank appear in exactly one rack; a rank found in none is still refused here.
  h.rack_of_rank.assign(j.workers, UINT16_MAX);
  for (const auto& entry : j.ranks_by_rack) {
    const auto it = std::find_if(cfg.racks.begin(), cfg.racks.end(), [&](const config::Rack& r) { return r.name == entry.first; });
    if (it == cfg.racks.end()) return unexpected(job_label(j) + ".ranks_by_rack: no rack \"" + entry.first + "\"");
    for (uint16_t rank : entry.second) {
      if (rank < j.workers) h.rack_of_rank[rank] = static_cast<uint16_t>(it - cfg.racks.begin());
    }
  }
  for (uint16_t rank = 0; rank < j.workers; ++rank) {
    if (h.rack_of_rank[rank] == UINT16_MAX) {
      return unexpected(job_label(j) + ".ranks_by_rack: rank " + std::to_string(rank) + " is in no rack");
    }
    if (h.rack_of_rank[rank] == h.my_rack) h.local_ranks.push_back(rank);
  }
  if (cfg.racks.size() > kMaxRacks) return unexpected("racks: more than " + std::to_string(kMaxRacks) + " racks");
  for (size_t i = 0; i < cfg.racks.size(); ++i) {
    if (std::find(h.rack_of_rank.begin(), h.rack_of_rank.end(), i) == h.rack_of_rank.end()) {
      return unexpected(job_label(j) + ".ranks_by_rack: rack \"" + cfg.racks[i].name + "\" holds none of its ranks");
    }
  }

  auto homes = proto::HomeMap::build(plan.layout, static_cast<uint16_t>(cfg.racks.size()));
  if (!homes) return unexpected(job_label(j) + ": " + homes.error());
  h.homes = std::move(*homes);
  h.piece_elems = proto::job_segment_elems(mtu, Dtype::fp32, plan.math.ps);  // ps partials carry the tail
  if (h.piece_elems == 0) return unexpected(job_label(j) + ": MTU " + std::to_string(mtu) + " leaves no room for a partial");
  h.pieces_per_segment = static_cast<uint16_t>((plan.math.segment_elems + h.piece_elems - 1) / h.piece_elems);
  h.payload_key = proto::fwd_payload_key(plan.key);
  h.fingerprint = hub_fingerprint(cfg, plan);
  return h;
}

Expected<void, std::string> attach_hierarchy(JobPlan& plan, HubPlan hub) {
  plan.hub = std::make_shared<const HubPlan>(std::move(hub));
  const HubPlan& h = *plan.hub;
  HubMath& hm = plan.math.hub;
  hm.racks = static_cast<uint16_t>(h.hubs.size());
  hm.my_rack = h.my_rack;
  hm.local_ranks = h.local_ranks;
  hm.rack_of_rank = h.rack_of_rank;
  hm.homes = &h.homes;
  hm.piece_elems = h.piece_elems;
  hm.pieces_per_segment = h.pieces_per_segment;
  hm.piece_words = static_cast<uint16_t>((hm.racks * h.pieces_per_segment + 63) / 64);
  plan.memory = estimate_job_memory(plan.math, plan.layout, plan.first_owner, plan.lcores);
  return check_quota(plan);
}

}  // namespace phub::engine
