// Reading and writing classic pcap files.
#include "phub/gen/pcap.hpp"

#include <cerrno>
#include <cstring>

#include "phub/base/bytes.hpp"

namespace phub::gen {
namespace {

template <class T>
void put(std::vector<std::byte>& out, T v) {
  std::byte b[sizeof(T)];
  store_le<T>(b, v);
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

Expected<PcapWriter, std::string> PcapWriter::create(const std::string& path, uint32_t snaplen) {
  PcapWriter w;
  w.f_ = std::fopen(path.c_str(), "wb");
  if (w.f_ == nullptr) return unexpected("pcap: cannot create " + path + ": " + std::strerror(errno));
  std::vector<std::byte> hdr;
  put<uint32_t>(hdr, kPcapMagicUs);
  put<uint16_t>(hdr, 2);  // version 2.4
  put<uint16_t>(hdr, 4);
  put<int32_t>(hdr, 0);   // thiszone
  put<uint32_t>(hdr, 0);  // sigfigs
  put<uint32_t>(hdr, snaplen);
  put<uint32_t>(hdr, kLinktypeEthernet);
  if (std::fwrite(hdr.data(), 1, hdr.size(), w.f_) != hdr.size()) return unexpected("pcap: cannot write " + path);
  return w;
}

PcapWriter::~PcapWriter() {
  if (f_ != nullptr) std::fclose(f_);
}

PcapWriter& PcapWriter::operator=(PcapWriter&& o) noexcept {
  if (this != &o) {
    if (f_ != nullptr) std::fclose(f_);
    f_ = o.f_;
    frames_ = o.frames_;
    o.f_ = nullptr;
  }
  return *this;
}

Expected<void, std::string> PcapWriter::write(std::span<const std::byte> frame, uint64_t ts_us) {
  std::vector<std::byte> rec;
  rec.reserve(16 + frame.size());
  put<uint32_t>(rec, static_cast<uint32_t>(ts_us / 1'000'000));
  put<uint32_t>(rec, static_cast<uint32_t>(ts_us % 1'000'000));
  put<uint32_t>(rec, static_cast<uint32_t>(frame.size()));
  put<uint32_t>(rec, static_cast<uint32_t>(frame.size()));
  rec.insert(rec.end(), frame.begin(), frame.end());
  if (f_ == nullptr || std::fwrite(rec.data(), 1, rec.size(), f_) != rec.size()) {
    return unexpected(std::string("pcap: write failed"));
  }
  ++frames_;
  return {};
}

Expected<void, std::string> PcapWriter::close() {
  if (f_ == nullptr) return {};
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) return unexpected(std::string("pcap: close failed: ") + std::strerror(errno));
  return {};
}

Expected<PcapFile, std::string> parse_pcap(std::span<const std::byte> all, const std::string& what) {
  if (all.size() < 24) return unexpected("pcap: " + what + " is too short for a pcap header");
  PcapFile out;
  const uint32_t raw = load_le<uint32_t>(all.data());
  const bool swapped = raw == bswap(kPcapMagicUs) || raw == bswap(kPcapMagicNs);
  auto u32 = [&](size_t off) { return swapped ? bswap(load_le<uint32_t>(all.data() + off)) : load_le<uint32_t>(all.data() + off); };
  out.magic = u32(0);
  if (out.magic != kPcapMagicUs && out.magic != kPcapMagicNs) return unexpected("pcap: " + what + ": unknown magic");
  out.linktype = u32(20);
  const uint64_t frac_ns = out.magic == kPcapMagicUs ? 1000 : 1;
  size_t off = 24;
  while (off + 16 <= all.size()) {
    const uint32_t incl = u32(off + 8);
    if (incl > all.size() - off - 16) return unexpected("pcap: " + what + ": truncated record");
    PcapFrame fr;
    fr.ts_ns = uint64_t{u32(off)} * 1'000'000'000 + uint64_t{u32(off + 4)} * frac_ns;
    fr.data.assign(all.begin() + static_cast<long>(off + 16), all.begin() + static_cast<long>(off + 16 + incl));
    out.frames.push_back(std::move(fr));
    off += 16 + incl;
  }
  if (off != all.size()) return unexpected("pcap: " + what + ": truncated record header");
  return out;
}

Expected<PcapFile, std::string> read_pcap(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return unexpected("pcap: cannot open " + path + ": " + std::strerror(errno));
  std::vector<std::byte> all;
  std::byte buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) all.insert(all.end(), buf, buf + n);
  std::fclose(f);
  return parse_pcap(all, path);
}

}  // namespace phub::gen
