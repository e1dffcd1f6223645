// Every file in tests/unit/config/broken is rejected with the fragments its "-- expect:" lines name.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "phub/config/load.hpp"
#include "test_util.hpp"

namespace phub::config::test {
namespace {

std::vector<std::string> expectations(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> out;
  const std::string tag = "-- expect: ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(tag, 0) == 0) out.push_back(line.substr(tag.size()));
  }
  return out;
}

TEST(Broken, EveryFileIsRejectedWithItsExpectedMessage) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(source_path("tests/unit/config/broken"))) {
    if (e.path().extension() == ".lua") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  EXPECT_GE(files.size(), 10u);
  for (const auto& file : files) {
    SCOPED_TRACE(file.filename().string());
    auto want = expectations(file);
    ASSERT_FALSE(want.empty()) << "no '-- expect:' line";
    auto cfg = load_file(file.string());
    ASSERT_FALSE(cfg.has_value()) << "loaded";
    for (const auto& fragment : want) EXPECT_NE(cfg.error().find(fragment), std::string::npos) << cfg.error();
  }
}

TEST(Broken, MissingFileNamesThePath) {
  auto cfg = load_file(source_path("tests/unit/config/broken/no-such-file.lua"));
  ASSERT_FALSE(cfg.has_value());
  EXPECT_NE(cfg.error().find("no-such-file.lua: cannot open"), std::string::npos) << cfg.error();
}

}  // namespace
}  // namespace phub::config::test
