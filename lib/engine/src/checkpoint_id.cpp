// The identity and config fingerprint of a ps job shard's checkpoints.
#include "phub/engine/checkpoint_id.hpp"

#include <cstring>
#include <string>

#include "phub/proto/auth.hpp"

namespace phub::engine {
namespace {

template <class T>
void put(std::string& s, const T& v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

}  // namespace

uint64_t checkpoint_fingerprint(const JobPlan& plan) noexcept {
  const config::Job& j = plan.cfg;
  std::string s = "phub checkpoint fingerprint 1";
  put(s, static_cast<uint8_t>(j.mode));
  put(s, static_cast<uint8_t>(j.dtype));
  put(s, j.keys.size());
  for (const auto& k : j.keys) {
    put(s, k.name.size());
    s += k.name;
    put(s, k.elems);
  }
  const config::Optimizer& o = j.optimizer;
  put(s, static_cast<uint8_t>(o.kind));
  put(s, o.lr);
  put(s, o.momentum);
  put(s, o.beta1);
  put(s, o.beta2);
  put(s, o.eps);
  put(s, o.weight_decay);
  put(s, static_cast<uint8_t>(o.adamw));
  // Unsharded, the state is every key's elements in order, whatever the chunking; sharded, the chunks
  // this server owns depend on these.
  if (j.shard_count > 1) {
    put(s, j.chunk_bytes);
    put(s, j.shard_count);
    put(s, j.shard_index);
    put(s, plan.lcores);
  }
  return proto::siphash24(proto::AuthKey{0x70687562636b7074ull, 0x66696e6765727072ull},
                          std::as_bytes(std::span<const char>(s.data(), s.size())));
}

persist::CheckpointId checkpoint_id(const JobPlan& plan) {
  return persist::CheckpointId{plan.cfg.name, static_cast<uint16_t>(plan.cfg.id), plan.cfg.shard_index,
                               checkpoint_fingerprint(plan)};
}

persist::CheckpointKey checkpoint_key(const JobPlan& plan) { return persist::checkpoint_key(plan.cfg.secret, plan.cfg.id); }

}  // namespace phub::engine
