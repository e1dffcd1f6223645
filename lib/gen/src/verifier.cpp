// Expected results: allreduce from the patterns, ps from a replayed model of the server's optimizer.
#include "phub/gen/verifier.hpp"

#include <cstring>

namespace phub::gen {
namespace {

float widen(std::span<const std::byte> bytes, Dtype d, size_t i) {
  float f = 0;
  if (i * dtype_bytes(d) + dtype_bytes(d) <= bytes.size()) {
    reference_kernels().init(&f, bytes.data() + i * dtype_bytes(d), d, 1);
  }
  return f;
}

}  // namespace

std::string Mismatch::describe(uint32_t job_id) const {
  return "job " + std::to_string(job_id) + " rank " + std::to_string(rank) + (init ? " init ack" : " round " +
         std::to_string(round)) + " chunk " + std::to_string(chunk) + " segment " + std::to_string(seg) +
         ": element " + std::to_string(elem) + " is " + std::to_string(got) + ", expected " + std::to_string(want);
}

Verifier::Verifier(const Workload& wl, const SlotMap& slots) : wl_(&wl), slots_(&slots) {
  if (wl.spec().mode != Mode::ps) return;
  const size_t ob = dtype_bytes(wl.out_dtype());
  ps_.resize(slots.size());
  size_t off = 0;
  for (uint32_t i = 0; i < slots.size(); ++i) {
    ps_[i].offset = off;
    off += slots[i].elems;
  }
  weights_.resize(off);
  m1_.assign(off, 0.0f);
  m2_.assign(off, 0.0f);
  cache_.resize(off * ob * 2);
  init_ack_.resize(off * ob);
  const agg::Kernels& k = reference_kernels();
  for (uint32_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    const auto init = wl.init_bytes(Workload::init_pattern(s.chunk, s.seg), s.elems);
    k.init(weights_.data() + ps_[i].offset, init.data(), wl.spec().dtype, s.elems);
    k.narrow(init_ack_.data() + ps_[i].offset * ob, weights_.data() + ps_[i].offset, wl.out_dtype(), s.elems);
  }
}

void Verifier::advance(uint32_t slot, uint64_t updates) {
  const Slot& s = (*slots_)[slot];
  PsSlot& p = ps_[slot];
  const agg::Kernels& k = reference_kernels();
  const size_t ob = dtype_bytes(wl_->out_dtype());
  const auto kind = wl_->spec().optimizer.kind;
  while (p.updates < updates) {
    agg::OptimizerParams params = wl_->spec().optimizer;
    params.step = p.updates + 1;
    params.grad_scale = wl_->grad_scale();
    const auto grad = wl_->sum(pattern_index(p.updates, s.chunk, s.seg));
    float* w = weights_.data() + p.offset;
    k.optimize(params, w, kind == agg::OptimizerKind::sgd ? nullptr : m1_.data() + p.offset,
               kind == agg::OptimizerKind::adam ? m2_.data() + p.offset : nullptr, grad.data(), s.elems);
    const uint64_t round = p.updates;  // the result of round r is the weights after update r + 1
    k.narrow(cache_.data() + (p.offset * 2 + (round % 2) * s.elems) * ob, w, wl_->out_dtype(), s.elems);
    p.cached_round[round % 2] = round;
    ++p.updates;
  }
}

std::span<const std::byte> Verifier::expected_result(uint32_t slot, uint64_t round) {
  const Slot& s = (*slots_)[slot];
  if (wl_->spec().mode == Mode::allreduce) {
    return wl_->allreduce_result(pattern_index(round, s.chunk, s.seg), s.elems);
  }
  // A round far beyond the model (a hostile or corrupt trace) is not replayed update by update.
  constexpr uint64_t kMaxReplayUpdates = 1 << 16;
  if (round >= ps_[slot].updates + kMaxReplayUpdates) return {};
  advance(slot, round + 1);
  const PsSlot& p = ps_[slot];
  if (p.cached_round[round % 2] != round) return {};
  const size_t ob = dtype_bytes(wl_->out_dtype());
  return {cache_.data() + (p.offset * 2 + (round % 2) * s.elems) * ob, s.elems * ob};
}

std::span<const std::byte> Verifier::expected_init_ack(uint32_t slot) {
  const size_t ob = dtype_bytes(wl_->out_dtype());
  return {init_ack_.data() + ps_[slot].offset * ob, (*slots_)[slot].elems * ob};
}

Check Verifier::compare(uint16_t rank, uint32_t slot, uint64_t round, bool init, std::span<const std::byte> want,
                        std::span<const std::byte> got) {
  if (want.size() == got.size() && std::memcmp(want.data(), got.data(), want.size()) == 0) return Check::ok;
  if (kept_.size() < kKeep) {
    const Slot& s = (*slots_)[slot];
    const Dtype d = wl_->out_dtype();
    const size_t eb = dtype_bytes(d);
    size_t i = 0;
    while (i * eb < want.size() && i * eb < got.size() && std::memcmp(want.data() + i * eb, got.data() + i * eb, eb) == 0) {
      ++i;
    }
    kept_.push_back(Mismatch{rank, s.chunk, s.seg, static_cast<uint32_t>(i), round, widen(got, d, i), widen(want, d, i),
                             init});
  }
  return Check::mismatch;
}

Check Verifier::check_result(uint16_t rank, uint32_t slot, uint64_t round, std::span<const std::byte> payload) {
  const auto want = expected_result(slot, round);
  if (want.empty()) return Check::unverifiable;
  return compare(rank, slot, round, false, want, payload);
}

Check Verifier::check_init_ack(uint32_t slot, std::span<const std::byte> payload) {
  if (wl_->spec().mode != Mode::ps) return Check::unverifiable;
  return compare(0, slot, 0, true, expected_init_ack(slot), payload);
}

}  // namespace phub::gen
