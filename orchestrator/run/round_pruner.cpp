#include "orchestrator/run/round_pruner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "common/base/fault_injection.h"

namespace ens {
namespace {

// Every directory of the round holding member files, sorted: each member directory (trained,
// or left by an attempt) and each published pack directory (pack_results.h: its files have the
// member files' names, so retention removes the same ones from both).
std::vector<std::string> ResultDirsOf(const RunLayout& layout, int round) {
  std::vector<std::string> dirs;
  for (const std::string& parent : {layout.MembersDir(round), layout.RoundDir(round) + "/packs"}) {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(parent, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      if (it->is_directory(ec)) dirs.push_back(it->path().string());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

uint64_t Remove(const RunLayout& layout, int round, RoundFiles level) {
  std::vector<std::string> problems;
  const uint64_t freed = RemoveRoundFiles(level, ResultDirsOf(layout, round), &problems);
  for (const std::string& p : problems)
    spdlog::warn("retention: round {}: cannot remove {} (left in place)", round, p);
  return freed;
}

}  // namespace

StatusOr<PruneOutcome> PruneRounds(const RetentionSpec& spec, const RunLayout& layout, Journal* journal,
                                   RunProgress* progress, bool finish_interrupted) {
  PruneOutcome out;
  if (finish_interrupted)
    for (const RoundPrunedRecord& p : progress->pruned_since_commit) out.bytes_freed += Remove(layout, p.round, p.files);
  const std::vector<RoundPrune> due = PrunesDue(spec, progress->round_files);
  if (due.empty()) return out;
  std::vector<nlohmann::json> records;
  for (const RoundPrune& d : due) records.push_back(ToRecord(RoundPrunedRecord{d.round, d.to}));
  Status s = journal->AppendBatch(records);
  if (!s.ok()) return Status::IOError("retention: cannot journal the pruning of " + std::to_string(due.size()) +
                                      " round(s) (no file was removed): " + s.message());
  for (const nlohmann::json& r : records) progress->Apply(r);
  CrashPoint("after_round_pruned");
  for (const RoundPrune& d : due) {
    out.bytes_freed += Remove(layout, d.round, d.to);
    ++out.rounds_lowered;
  }
  return out;
}

}  // namespace ens
