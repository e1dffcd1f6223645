// File names, the newest valid checkpoint of a job shard, and pruning of old ones.
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "phub/persist/checkpoint.hpp"

namespace phub::persist {
namespace {

constexpr std::string_view kSuffix = ".phubckpt";
constexpr std::string_view kTempSuffix = ".phubckpt.tmp";
constexpr std::string_view kSupersededSuffix = ".phubckpt.superseded";

std::string prefix_of(const CheckpointId& id) { return id.job + ".s" + std::to_string(id.shard_index) + ".r"; }

// The round in "<prefix><10 digits><suffix>", or nullopt when the name is not one of this id's.
std::optional<uint32_t> round_in(std::string_view name, std::string_view prefix, std::string_view suffix) {
  if (name.size() != prefix.size() + 10 + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix)) {
    return std::nullopt;
  }
  auto digits = name.substr(prefix.size(), 10);
  uint32_t round = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), round);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return round;
}

struct Found {
  uint32_t round;
  std::filesystem::path path;
  bool temporary;
};

std::vector<Found> list(const std::filesystem::path& dir, const CheckpointId& id) {
  std::vector<Found> out;
  const std::string prefix = prefix_of(id);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (auto r = round_in(name, prefix, kSuffix)) out.push_back({*r, e.path(), false});
    else if (auto t = round_in(name, prefix, kTempSuffix)) out.push_back({*t, e.path(), true});
  }
  std::sort(out.begin(), out.end(), [](const Found& a, const Found& b) {
    return a.round != b.round ? a.round > b.round : a.temporary < b.temporary;
  });
  return out;
}

}  // namespace

std::string checkpoint_file_name(const CheckpointId& id, uint32_t round) {
  char digits[11];
  std::snprintf(digits, sizeof digits, "%010u", round);
  return prefix_of(id) + digits + std::string(kSuffix);
}

Restored restore_newest(const std::filesystem::path& dir, const Expectation& expect, const CheckpointKey& key) {
  Restored r;
  for (const auto& f : list(dir, expect.id)) {
    const std::string name = f.path.filename().string();
    if (f.temporary) {
      r.skipped.push_back(name + ": a write that never reached its rename (temporary file)");
      continue;
    }
    if (r.checkpoint) continue;
    auto cp = read_checkpoint(f.path, key, &expect);
    if (!cp) {
      r.skipped.push_back(name + ": " + cp.error());
      continue;
    }
    if (cp->meta.round != f.round) {
      r.skipped.push_back(name + ": its header says round " + std::to_string(cp->meta.round));
      continue;
    }
    r.checkpoint = std::move(*cp);
    r.file = f.path;
  }
  return r;
}

size_t supersede_checkpoints(const std::filesystem::path& dir, const CheckpointId& id) {
  const std::string prefix = prefix_of(id);
  std::vector<std::filesystem::path> current;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    std::error_code rm;
    if (round_in(name, prefix, kSupersededSuffix)) std::filesystem::remove(e.path(), rm);
    else if (round_in(name, prefix, kSuffix)) current.push_back(e.path());
  }
  size_t moved = 0;
  for (const auto& p : current) {
    std::error_code mv;
    // rename() moves a link itself, never its target; a name planted meanwhile is replaced, not followed.
    std::filesystem::rename(p, std::filesystem::path(p.string() + ".superseded"), mv);
    if (!mv) ++moved;
  }
  return moved;
}

size_t prune_checkpoints(const std::filesystem::path& dir, const CheckpointId& id, size_t keep) {
  size_t kept = 0;
  size_t removed = 0;
  for (const auto& f : list(dir, id)) {
    if (!f.temporary && kept < keep) {
      ++kept;
      continue;
    }
    std::error_code ec;
    if (std::filesystem::remove(f.path, ec)) ++removed;
  }
  return removed;
}

}  // namespace phub::persist
