// Retention: which files of its committed rounds a long run keeps (config "retention").
//
// Every round keeps its summary, pack files and, per member, member.json, metrics.json and
// history.jsonl: the run's history stays whole. What a retention policy may remove are the
// big files: the predictions (holdout_pred.f32, pool_pred.f32: pool rows x members x 4 B a
// round), the checkpoint (weights.bin or checkpoint.pt, or a command member's model/ folder) and the
// optimizer's state (train_state.pt).
//
// A committed round is *kept* when keep_rounds is 0 (the default: keep everything), when it
// is one of the last keep_rounds committed rounds, or when it is pinned. Then:
//   kAll            a kept round: every file, so predict, export, verify, a mutation and the
//                   next round's warm start find what they read
//   kTrainState     the round before a kept one: its train_state.pt only (a kept round's
//                   verify retrains its warm-started members from it); the rest is removed
//   kRecords        any other round: the records only
// The last committed round is always kept (keep_rounds >= 1): the next round warm-starts
// from it and a deferred mutation reads its pool predictions. A round's level only ever goes
// down (kAll -> kTrainState -> kRecords): pinning a round whose files are gone keeps nothing.
//
// Applied at commit (orchestrator/run/supervisor.cpp): each change of level is journaled
// (round_pruned, common/state/journal.h) before its files are removed, so a crash in between is
// finished on resume. WantedFiles and PrunesDue are pure; RemoveRoundFiles and DirectoryBytes
// touch the file system. Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ens {

struct RetentionSpec {
  int keep_rounds = 0;    // keep the files of the last N committed rounds; 0 = every round. Default: 0
  std::vector<int> pin;   // rounds whose files are kept whatever keep_rounds says. Default: []
  bool KeepsEverything() const { return keep_rounds == 0; }
};

// What a committed round still holds, most first (the values are journaled).
enum class RoundFiles : uint8_t { kAll = 0, kTrainState = 1, kRecords = 2 };
const char* Name(RoundFiles f);
// "all", "train_state", "records"; false for anything else.
bool ParseRoundFiles(const std::string& s, RoundFiles* out);

// The level `spec` wants for committed round `round` when `last` is the last committed round
// (round <= last).
RoundFiles WantedFiles(const RetentionSpec& spec, int round, int last);

// The rounds whose level must go down now, with their new levels, given each committed round's
// current level (`current[r]`, one per committed round 0..last). In round order.
struct RoundPrune {
  int round = 0;
  RoundFiles to = RoundFiles::kAll;
};
std::vector<RoundPrune> PrunesDue(const RetentionSpec& spec, const std::vector<RoundFiles>& current);

// The paths under one member directory a round at `level` no longer holds (files, and a
// command member's model folder), whether they exist or not.
std::vector<std::string> RemovedAt(RoundFiles level, const std::string& member_dir);

// Removes RemovedAt(level, dir) for each member directory, or pack directory (pack_results.h:
// its files carry the member files' names); absent paths are fine (a removal
// already done, a member without a checkpoint). Returns the bytes freed; a path that cannot be
// removed is added to `problems` ("<path>: <reason>") and skipped.
uint64_t RemoveRoundFiles(RoundFiles level, const std::vector<std::string>& member_dirs,
                          std::vector<std::string>* problems);

// The bytes of every regular file under `dir` (recursively; links not followed); 0 when it
// does not exist.
uint64_t DirectoryBytes(const std::string& dir);

}  // namespace ens
