// libFuzzer target: the checkpoint parser (lib/persist) on arbitrary bytes. What parses must be
// internally consistent: the arrays hold exactly the elements the header names.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "phub/persist/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exactly sized heap copy, so that ASan catches any read past the end.
  std::vector<std::byte> file(size);
  if (size != 0) std::memcpy(file.data(), data, size);
  auto cp = phub::persist::parse_checkpoint(file, phub::persist::CheckpointKey{});
  if (cp) {
    if (cp->arrays.empty()) std::abort();
    for (const auto& a : cp->arrays) {
      if (a.size() != cp->meta.elems) std::abort();
    }
  }
  return 0;
}
