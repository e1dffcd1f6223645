// Kernel selection: support checks against the kernel's view of the CPU, tables, and the PHUB_ISA override.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "support.hpp"

namespace phub::agg::test {
namespace {

// CPU flags as Linux reports them (it hides AVX-512 when the OS does not save zmm state); empty elsewhere.
std::set<std::string> proc_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(AggDispatch, SupportMatchesProcCpuinfo) {
  const auto flags = proc_cpu_flags();
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags line to compare with";
  const auto has = [&flags](const char* f) { return flags.count(f) != 0; };
  EXPECT_TRUE(isa_supported(Isa::scalar));
  EXPECT_EQ(isa_supported(Isa::avx2), has("avx") && has("avx2") && has("f16c"));
  EXPECT_EQ(isa_supported(Isa::avx512),
            has("avx2") && has("f16c") && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq"));
}

TEST(AggDispatch, TablesNameTheirIsaAndAreComplete) {
  for (const Isa isa : kAllIsas) {
    if (!isa_supported(isa)) continue;
    const Kernels& k = kernels_for(isa);
    EXPECT_EQ(k.isa, isa);
    EXPECT_EQ(std::string(k.name), isa_name(isa));
    EXPECT_TRUE(k.init && k.accumulate && k.tall && k.scale && k.narrow && k.optimize) << k.name;
  }
}

TEST(AggDispatch, BestIsTheWidestSupported) {
  const Isa best = best_isa();
  EXPECT_TRUE(isa_supported(best));
  for (const Isa isa : kAllIsas) {
    if (static_cast<int>(isa) > static_cast<int>(best)) {
      EXPECT_FALSE(isa_supported(isa)) << isa_name(isa);
    }
  }
}

TEST(AggDispatch, ChooseHonoursOverrideAndReportsErrors) {
  const Selection unset = choose_isa(nullptr);
  EXPECT_EQ(unset.isa, best_isa());
  EXPECT_NE(unset.reason.find(std::string(isa_name(best_isa()))), std::string::npos) << unset.reason;
  EXPECT_EQ(choose_isa("").isa, best_isa());

  const Selection forced = choose_isa("scalar");
  EXPECT_EQ(forced.isa, Isa::scalar);
  EXPECT_NE(forced.reason.find("PHUB_ISA"), std::string::npos) << forced.reason;
  EXPECT_EQ(forced.reason.find("error"), std::string::npos) << forced.reason;
  EXPECT_FALSE(forced.override_failed);

  const Selection bogus = choose_isa("sse9");
  EXPECT_EQ(bogus.isa, best_isa());
  EXPECT_NE(bogus.reason.find("error"), std::string::npos) << bogus.reason;
  EXPECT_NE(bogus.reason.find("sse9"), std::string::npos) << bogus.reason;
  EXPECT_TRUE(bogus.override_failed);

  for (const Isa isa : kAllIsas) {
    const Selection s = choose_isa(std::string(isa_name(isa)).c_str());
    if (isa_supported(isa)) {
      EXPECT_EQ(s.isa, isa);
    } else {
      EXPECT_EQ(s.isa, best_isa());
      EXPECT_NE(s.reason.find("not supported"), std::string::npos) << s.reason;
      EXPECT_TRUE(s.override_failed);
    }
  }
}

TEST(AggDispatch, SelectionFollowsEnvironmentAndIsLogged) {
  const char* env = std::getenv("PHUB_ISA");  // NOLINT(concurrency-mt-unsafe): tests are single-threaded
  const Kernels& k = select_kernels();
  EXPECT_EQ(k.isa, choose_isa(env).isa);
  EXPECT_EQ(&k, &select_kernels()) << "chosen once";
  EXPECT_NE(describe_selection().find(k.name), std::string::npos) << describe_selection();
}

}  // namespace
}  // namespace phub::agg::test
