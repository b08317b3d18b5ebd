#include "common/state/retention.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "common/state/run_layout.h"

namespace ens {
namespace {

namespace fs = std::filesystem;

bool Kept(const RetentionSpec& spec, int round, int last) {
  return spec.KeepsEverything() || round > last - spec.keep_rounds ||
         std::find(spec.pin.begin(), spec.pin.end(), round) != spec.pin.end();
}

// The bytes under `p` (a file, or a folder's files), without following links; 0 if absent.
uint64_t BytesUnder(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  if (ec || !fs::exists(st)) return 0;
  if (fs::is_regular_file(st)) {
    const uintmax_t n = fs::file_size(p, ec);
    return ec ? 0 : n;
  }
  if (!fs::is_directory(st)) return 0;
  uint64_t total = 0;
  for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code e2;
    if (it->is_regular_file(e2) && !it->is_symlink(e2)) {
      const uintmax_t n = it->file_size(e2);
      if (!e2) total += n;
    }
  }
  return total;
}

}  // namespace

const char* Name(RoundFiles f) {
  switch (f) {
    case RoundFiles::kAll: return "all";
    case RoundFiles::kTrainState: return "train_state";
    case RoundFiles::kRecords: return "records";
  }
  return "all";
}

bool ParseRoundFiles(const std::string& s, RoundFiles* out) {
  for (RoundFiles f : {RoundFiles::kAll, RoundFiles::kTrainState, RoundFiles::kRecords})
    if (s == Name(f)) {
      *out = f;
      return true;
    }
  return false;
}

RoundFiles WantedFiles(const RetentionSpec& spec, int round, int last) {
  if (Kept(spec, round, last)) return RoundFiles::kAll;
  if (round < last && Kept(spec, round + 1, last)) return RoundFiles::kTrainState;
  return RoundFiles::kRecords;
}

std::vector<RoundPrune> PrunesDue(const RetentionSpec& spec, const std::vector<RoundFiles>& current) {
  std::vector<RoundPrune> out;
  if (spec.KeepsEverything() || current.empty()) return out;
  const int last = static_cast<int>(current.size()) - 1;
  for (int r = 0; r <= last; ++r) {
    const RoundFiles want = WantedFiles(spec, r, last);
    if (want > current[static_cast<size_t>(r)]) out.push_back({r, want});
  }
  return out;
}

std::vector<std::string> RemovedAt(RoundFiles level, const std::string& member_dir) {
  if (level == RoundFiles::kAll) return {};
  const MemberFiles f(member_dir);
  std::vector<std::string> out = {f.HoldoutPred(), f.PoolPred(), f.Checkpoint(), f.Weights(), f.CommandModel()};
  if (level == RoundFiles::kRecords) out.push_back(f.TrainState());
  return out;
}

uint64_t RemoveRoundFiles(RoundFiles level, const std::vector<std::string>& member_dirs,
                          std::vector<std::string>* problems) {
  uint64_t freed = 0;
  for (const std::string& dir : member_dirs) {
    for (const std::string& path : RemovedAt(level, dir)) {
      const uint64_t bytes = BytesUnder(path);
      std::error_code ec;
      fs::remove_all(path, ec);
      if (ec) {
        problems->push_back(path + ": " + ec.message());
        continue;
      }
      freed += bytes;
    }
  }
  return freed;
}

uint64_t DirectoryBytes(const std::string& dir) { return BytesUnder(dir); }

}  // namespace ens
