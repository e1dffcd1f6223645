// libFuzzer target: arbitrary bytes through phub-pktgen's --verify-pcap path (libpcap's reader, frame parser,
// result verifier of an allreduce and a ps job). Whatever parses must round-trip through the writer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <unistd.h>

#include "phub/gen/pcap.hpp"
#include "phub/gen/slots.hpp"
#include "phub/gen/verifier.hpp"
#include "phub/gen/workload.hpp"
#include "phub/proto/frame.hpp"

using namespace phub;

namespace {

// The workloads are built once; each input gets fresh verifiers (the ps model advances with the rounds).
struct Job {
  explicit Job(gen::JobSpec s) : wl(*gen::Workload::build(s, 1500)), slots(wl, {}) {}
  gen::Workload wl;
  gen::SlotMap slots;
};

gen::JobSpec spec(uint32_t id, gen::Mode mode) {
  gen::JobSpec s;
  s.id = id;
  s.mode = mode;
  s.workers = 3;
  s.dtype = Dtype::bf16;
  s.key_elems = {3000};
  s.chunk_bytes = 4096;
  s.optimizer.kind = agg::OptimizerKind::adam;
  return s;
}

void verify(const Job& j, gen::Verifier& v, const proto::PhubFrame& f) {
  const int64_t slot = j.slots.find(f.hdr.chunk_id, f.hdr.elem_offset);
  if (slot < 0) return;
  (void)v.check_result(f.hdr.rank, static_cast<uint32_t>(slot), f.hdr.round, f.payload);
  if (f.hdr.round == 0) (void)v.check_init_ack(static_cast<uint32_t>(slot), f.payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = gen::parse_pcap(std::span(reinterpret_cast<const std::byte*>(data), size), "input");
  if (!file) return 0;
  static const Job sum(spec(1, gen::Mode::allreduce)), ps(spec(2, gen::Mode::ps));
  gen::Verifier vsum(sum.wl, sum.slots), vps(ps.wl, ps.slots);
  for (const auto& fr : file->frames) {
    auto f = proto::parse_phub_frame(fr.data);
    if (!f || f->hdr.opcode != proto::Opcode::result) continue;
    if (f->hdr.job_id == 1) verify(sum, vsum, *f);
    if (f->hdr.job_id == 2) verify(ps, vps, *f);
  }
  // Round trip: what was read, written again in the microsecond format with the snap length it was read
  // with, reads back the same frames.
  static const std::string path = "/tmp/fuzz-trace-" + std::to_string(getpid()) + ".pcap";
  {
    auto w = gen::PcapWriter::create(path, file->snaplen);
    if (!w) std::abort();
    for (const auto& fr : file->frames) {
      if (!w->write(fr.data, fr.ts_ns / 1000)) std::abort();
    }
    if (!w->close()) std::abort();
  }
  auto back = gen::read_pcap(path);
  std::remove(path.c_str());
  if (!back || back->frames.size() != file->frames.size()) std::abort();
  for (size_t i = 0; i < back->frames.size(); ++i) {
    if (back->frames[i].data != file->frames[i].data) std::abort();
  }
  return 0;
}
