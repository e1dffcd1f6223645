// remove_runtime_dir (phub/drivers/runtime_dir.hpp) on real directories under /var/run/dpdk: the tree goes,
// symbolic links are removed as links and never followed, a link in the directory's place stays.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "phub/base/eal_args.hpp"
#include "phub/drivers/runtime_dir.hpp"

namespace phub::drivers {
namespace {

namespace fs = std::filesystem;

// A directory outside /var/run/dpdk with one file: what a link may point to, and must survive.
struct Outside {
  fs::path dir = fs::temp_directory_path() / ("phub-rtdir-outside-" + std::to_string(getpid()));
  fs::path file = dir / "keep";
  Outside() {
    fs::create_directories(dir);
    std::ofstream(file) << "keep";
  }
  ~Outside() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

std::string unique_prefix(const char* what) { return std::string("phub-rtdir-") + what + "-" + std::to_string(getpid()); }

TEST(RuntimeDir, RemovesTheTreeAndUnlinksLinksWithoutFollowingThem) {
  Outside outside;
  const std::string prefix = unique_prefix("tree");
  const fs::path dir = fs::path(kDpdkRuntimeRoot) / prefix;
  fs::create_directories(dir / "sub");
  std::ofstream(dir / "config") << "x";
  std::ofstream(dir / "sub" / "fbarray") << "x";
  fs::create_symlink(outside.dir, dir / "link-to-dir");
  fs::create_symlink(outside.file, dir / "sub" / "link-to-file");

  auto removed = remove_runtime_dir(prefix);
  EXPECT_TRUE(removed) << (removed ? "" : removed.error());
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir)));
  EXPECT_TRUE(fs::exists(outside.file));  // reached only through the links
}

TEST(RuntimeDir, ALinkInTheDirectorysPlaceIsRefusedAndLeft) {
  Outside outside;
  const std::string prefix = unique_prefix("link");
  const fs::path link = fs::path(kDpdkRuntimeRoot) / prefix;
  fs::create_directories(kDpdkRuntimeRoot);
  fs::create_symlink(outside.dir, link);

  auto removed = remove_runtime_dir(prefix);
  const bool link_left = fs::is_symlink(link);
  std::error_code ignored;
  fs::remove(link, ignored);
  EXPECT_TRUE(link_left);
  EXPECT_TRUE(fs::exists(outside.file));
  ASSERT_FALSE(removed);
  EXPECT_NE(removed.error().find(link.string()), std::string::npos) << removed.error();
}

TEST(RuntimeDir, APrefixThatIsNotOnePlainComponentIsRefused) {
  for (const char* bad : {"", ".", "..", "../tmp", "a/b"}) {
    auto removed = remove_runtime_dir(bad);
    EXPECT_FALSE(removed) << bad;
  }
  EXPECT_TRUE(fs::exists("/tmp"));
}

TEST(RuntimeDir, ADirectoryThatIsNotThereIsAlreadyRemoved) {
  EXPECT_TRUE(remove_runtime_dir(unique_prefix("absent")));
}

}  // namespace
}  // namespace phub::drivers
