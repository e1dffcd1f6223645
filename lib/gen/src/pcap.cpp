// Reading and writing classic pcap files with libpcap.
#include "phub/gen/pcap.hpp"

#include <pcap/pcap.h>

#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::gen {
namespace {

// The magic of a classic pcap file in host order, 0 when `head` starts none.
uint32_t classic_magic(const std::byte* head) {
  const uint32_t raw = load_le<uint32_t>(head);
  for (const uint32_t m : {kPcapMagicUs, kPcapMagicNs}) {
    if (raw == m || raw == bswap(m)) return m;
  }
  return 0;
}

// Every record of the classic pcap file open in `f` (which this closes), timestamps in nanoseconds.
Expected<PcapFile, std::string> read_stream(std::FILE* f, const std::string& what) {
  std::byte head[4];
  if (std::fread(head, 1, sizeof head, f) != sizeof head || std::fseek(f, 0, SEEK_SET) != 0) {
    std::fclose(f);
    return unexpected("pcap: " + what + " is too short for a pcap header");
  }
  PcapFile out;
  out.magic = classic_magic(head);
  if (out.magic == 0) {
    std::fclose(f);
    return unexpected("pcap: " + what + ": unknown magic");
  }
  char err[PCAP_ERRBUF_SIZE] = "";
  pcap_t* p = pcap_fopen_offline_with_tstamp_precision(f, PCAP_TSTAMP_PRECISION_NANO, err);
  if (p == nullptr) {
    std::fclose(f);
    return unexpected("pcap: " + what + ": " + err);
  }
  out.linktype = static_cast<uint32_t>(pcap_datalink(p));
  out.snaplen = static_cast<uint32_t>(pcap_snapshot(p));
  if (out.linktype != kLinktypeEthernet) {
    pcap_close(p);
    return unexpected("pcap: " + what + ": link type " + std::to_string(out.linktype) + " is not Ethernet");
  }
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  int rc = 0;
  while ((rc = pcap_next_ex(p, &h, &data)) == 1) {
    PcapFrame fr;  // the file's seconds are unsigned 32-bit, whatever sign libpcap's time_t gives them
    fr.ts_ns = uint64_t{static_cast<uint32_t>(h->ts.tv_sec)} * 1'000'000'000 + static_cast<uint64_t>(h->ts.tv_usec);
    const auto* bytes = reinterpret_cast<const std::byte*>(data);
    fr.data.assign(bytes, bytes + h->caplen);
    out.frames.push_back(std::move(fr));
  }
  std::string error = rc == PCAP_ERROR_BREAK ? "" : "pcap: " + what + ": " + pcap_geterr(p);
  pcap_close(p);
  if (!error.empty()) return unexpected(std::move(error));
  return out;
}

}  // namespace

Expected<PcapWriter, std::string> PcapWriter::create(const std::string& path, uint32_t snaplen) {
  PcapWriter w;
  w.snaplen_ = snaplen;
  w.pcap_ = pcap_open_dead_with_tstamp_precision(DLT_EN10MB, static_cast<int>(snaplen), PCAP_TSTAMP_PRECISION_MICRO);
  if (w.pcap_ == nullptr) return unexpected("pcap: cannot create " + path + ": out of memory");
  w.dump_ = pcap_dump_open(w.pcap_, path.c_str());
  if (w.dump_ == nullptr) return unexpected("pcap: cannot create " + path + ": " + pcap_geterr(w.pcap_));
  return w;
}

PcapWriter::~PcapWriter() { (void)close(); }

PcapWriter& PcapWriter::operator=(PcapWriter&& o) noexcept {
  if (this != &o) {
    (void)close();
    pcap_ = std::exchange(o.pcap_, nullptr);
    dump_ = std::exchange(o.dump_, nullptr);
    frames_ = o.frames_;
    snaplen_ = o.snaplen_;
  }
  return *this;
}

Expected<void, std::string> PcapWriter::write(std::span<const std::byte> frame, uint64_t ts_us) {
  if (dump_ == nullptr) return unexpected(std::string("pcap: write failed: the file is closed"));
  if (frame.size() > snaplen_) {
    return unexpected("pcap: a frame of " + std::to_string(frame.size()) + " bytes is longer than the snap length " +
                      std::to_string(snaplen_));
  }
  pcap_pkthdr h{};
  h.ts.tv_sec = static_cast<time_t>(ts_us / 1'000'000);
  h.ts.tv_usec = static_cast<suseconds_t>(ts_us % 1'000'000);
  h.caplen = h.len = static_cast<bpf_u_int32>(frame.size());
  pcap_dump(reinterpret_cast<u_char*>(dump_), &h, reinterpret_cast<const u_char*>(frame.data()));
  if (std::ferror(pcap_dump_file(dump_)) != 0) return unexpected(std::string("pcap: write failed"));
  ++frames_;
  return {};
}

Expected<void, std::string> PcapWriter::close() {
  bool ok = true;
  if (dump_ != nullptr) {
    ok = pcap_dump_flush(dump_) == 0 && std::ferror(pcap_dump_file(dump_)) == 0;
    pcap_dump_close(dump_);
    dump_ = nullptr;
  }
  if (pcap_ != nullptr) pcap_close(std::exchange(pcap_, nullptr));
  if (!ok) return unexpected(std::string("pcap: close failed: ") + std::strerror(errno));
  return {};
}

Expected<PcapFile, std::string> parse_pcap(std::span<const std::byte> all, const std::string& what) {
  if (all.size() < 24) return unexpected("pcap: " + what + " is too short for a pcap header");
  std::FILE* f = ::fmemopen(const_cast<std::byte*>(all.data()), all.size(), "rb");
  if (f == nullptr) return unexpected("pcap: " + what + ": " + std::strerror(errno));
  return read_stream(f, what);
}

Expected<PcapFile, std::string> read_pcap(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return unexpected("pcap: cannot open " + path + ": " + std::strerror(errno));
  return read_stream(f, path);
}

}  // namespace phub::gen
