// Journal: the append-only record of a run, one JSON object per line (journal.jsonl).
//
// Each Append writes one line and fsyncs before returning: a record that Append returned for
// is durable. AppendBatch does the same for many lines at the cost of one fsync. A supervisor killed mid-write leaves at most one torn last line, which Open
// drops (and truncates away); a bad line anywhere else is corruption, reported with its
// line number, never guessed around.
//
// Records: one struct each below, with its "event" name (kEvent) and its fields; ToRecord and
// the From* readers in journal.cpp write and read them: a record's keys are spelled in
// journal.cpp only. RunProgress (below) holds the records it keeps as these structs.
// A Journal is move-only and single-threaded (the supervisor's loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/state/retention.h"
#include "common/base/status.h"

namespace ens {

// run_started: the data was published (state_dir/data) and the config recorded.
struct RunStartedRecord {
  static constexpr const char* kEvent = "run_started";
  std::string config_fingerprint;
  int64_t features = 0;
  uint64_t train_rows = 0, holdout_rows = 0, pool_rows = 0;
};
// member_done: a member of `round` trained and its directory is complete (metrics.json's
// content in `metrics`). Journaled in batches, one fsync per batch.
struct MemberDoneRecord {
  static constexpr const char* kEvent = "member_done";
  int round = 0;
  std::string member;
  int index = 0, attempt = 0, slot = 0;
  int64_t pid = 0;
  nlohmann::json metrics;
  int64_t time = 0;  // unix seconds, as read back (Append sets it; 0 before)
  friend bool operator==(const MemberDoneRecord&, const MemberDoneRecord&) = default;
};
// member_failed: an attempt that will not be retried (permanent, or the last allowed).
struct MemberFailedRecord {
  static constexpr const char* kEvent = "member_failed";
  int round = 0;
  std::string member;
  int index = 0, attempt = 0;
  std::string error;
  bool permanent = false;
  int64_t time = 0;  // unix seconds, as read back (Append sets it; 0 before)
  friend bool operator==(const MemberFailedRecord&, const MemberFailedRecord&) = default;
};
// round_committed: the round's summary is written and its mutation appended. trained_rows is
// what the round trained on (net of drops); generation, train_rows and dropped_rows describe
// the next generation's table (all its rows, and how many of them are dropped).
struct RoundCommittedRecord {
  static constexpr const char* kEvent = "round_committed";
  int round = 0;
  uint64_t trained_rows = 0, generation = 0, train_rows = 0, dropped_rows = 0;
  std::vector<uint64_t> pool_used;  // pool rows this round's mutation moved into train
  std::string excluded_file;        // the dropped-rows file of `generation` ("" = none)
  nlohmann::json summary;           // EnsembleSummary::ToJson
  double wall_seconds = 0;
  // The last round decides no mutation; extending the run decides it then (mutation_applied).
  bool mutation_skipped = false;
  int64_t time = 0;  // unix seconds, as read back (Append sets it; 0 before)
  friend bool operator==(const RoundCommittedRecord&, const RoundCommittedRecord&) = default;
};
// mutation_applied: the mutation a last round skipped, decided when the run was extended.
struct MutationAppliedRecord {
  static constexpr const char* kEvent = "mutation_applied";
  int round = 0;
  uint64_t generation = 0, train_rows = 0, dropped_rows = 0;
  std::vector<uint64_t> pool_used;
  std::string excluded_file;
  uint64_t added = 0, dropped = 0;
};
// config_changed: a resume accepted a config that changes results (--accept-config-change).
struct ConfigChangedRecord {
  static constexpr const char* kEvent = "config_changed";
  int epoch = 0, from_round = 0;
  std::string fingerprint;
  std::vector<std::string> changes;  // DescribeChange of each
};
// run_extended: a finished run resumed with more rounds.
struct RunExtendedRecord {
  static constexpr const char* kEvent = "run_extended";
  int from_rounds = 0, to_rounds = 0;
};
// round_pruned: the retention policy (common/state/retention.h) lowered a committed round's files
// to `files`; journaled before they are removed (a resume finishes a removal a crash cut short).
struct RoundPrunedRecord {
  static constexpr const char* kEvent = "round_pruned";
  int round = 0;
  RoundFiles files = RoundFiles::kRecords;
};
// run_finished: no round is left to run ("all rounds done" or "stop_below_error reached").
struct RunFinishedRecord {
  static constexpr const char* kEvent = "run_finished";
  int rounds = 0;
  std::string reason;
};

// A record's journal line ("time" only where a record read back has it: Append sets it).
nlohmann::json ToRecord(const RunStartedRecord& r);
nlohmann::json ToRecord(const MemberDoneRecord& r);
nlohmann::json ToRecord(const MemberFailedRecord& r);
nlohmann::json ToRecord(const RoundCommittedRecord& r);
nlohmann::json ToRecord(const MutationAppliedRecord& r);
nlohmann::json ToRecord(const ConfigChangedRecord& r);
nlohmann::json ToRecord(const RunExtendedRecord& r);
nlohmann::json ToRecord(const RunFinishedRecord& r);
nlohmann::json ToRecord(const RoundPrunedRecord& r);
// Readers of the records replay needs. A missing key reads as the field's default, as journals
// of earlier versions lack later keys; the caller has checked the event.
MemberDoneRecord MemberDoneFrom(const nlohmann::json& j);
MemberFailedRecord MemberFailedFrom(const nlohmann::json& j);
RoundCommittedRecord RoundCommittedFrom(const nlohmann::json& j);
MutationAppliedRecord MutationAppliedFrom(const nlohmann::json& j);
ConfigChangedRecord ConfigChangedFrom(const nlohmann::json& j);
// false for a record whose round or files cannot be read (it is then ignored).
bool RoundPrunedFrom(const nlohmann::json& j, RoundPrunedRecord* out);
// Whether `j` is a record of type R.
template <typename R>
bool IsRecord(const nlohmann::json& j) {
  return j.is_object() && j.value("event", "") == R::kEvent;
}

class Journal {
 public:
  // Opens (creating if absent, 0600) and reads every record into records().
  static StatusOr<std::unique_ptr<Journal>> Open(const std::string& path);
  ~Journal();

  // Adds "time" (unix seconds) and appends durably. `written`, when given, receives the record
  // as its line holds it (with "time"), for a caller that applies it (RunProgress::Apply).
  Status Append(nlohmann::json record, nlohmann::json* written = nullptr);
  template <typename R>
  Status Append(const R& record, nlohmann::json* written = nullptr) {
    return Append(ToRecord(record), written);
  }
  // Appends every record with one write and one fdatasync (the member_done records of
  // RoundRunner's batch, which spans packs and is flushed by time, round_runner.h):
  // after an ok, all are durable; a crash mid-way leaves a prefix of them (and at most one
  // torn line, dropped on Open). A write or fdatasync that fails (a full disk) returns its error
  // naming the file and cuts the file back to its last whole record, so a later append, once
  // there is room, follows whole records (a cut that fails too leaves the torn line to Open).
  Status AppendBatch(std::vector<nlohmann::json> batch);
  // The records Open read, and only those: what is appended afterwards is on disk, not kept
  // here, so a long run's memory does not hold its history (the supervisor keeps its
  // RunProgress up to date with RunProgress::Apply; ReadJournal reads the whole file).
  const std::vector<nlohmann::json>& records() const { return records_; }
  // Lines dropped as torn when opening (0 or 1).
  int torn_lines_dropped() const { return torn_; }

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Adds "time" to each record and writes them all with one write and one fdatasync.
  Status Write(std::vector<nlohmann::json>* batch);
  std::string path_;
  int fd_ = -1;
  int torn_ = 0;
  uint64_t size_ = 0;  // bytes of whole records in the file: where a failed write is cut back to
  std::vector<nlohmann::json> records_;
};

// Reads a journal without opening it for writing (ensemblectl).
StatusOr<std::vector<nlohmann::json>> ReadJournal(const std::string& path);

// What the journal says about where a run stands.
struct RunProgress {
  bool started = false;
  bool finished = false;
  std::string finish_reason;
  int next_round = 0;                 // the round to run (or running) now
  uint64_t generation = 0;            // dataset generation of next_round
  uint64_t train_rows = 0;            // rows of that generation's train table (row ids below this)
  uint64_t dropped_rows = 0;          // of those, rows a mutation dropped (not trained on)
  std::vector<uint64_t> pool_used;    // pool rows already moved into train
  std::map<std::string, MemberDoneRecord> done;      // next_round: member name -> its member_done
  std::map<std::string, MemberFailedRecord> failed;  // next_round: member name -> last member_failed
  std::vector<RoundCommittedRecord> committed;       // round_committed records, in order (a later
                                                     // mutation_applied folded into its round's)
  int config_epoch = 0;                          // the last config_changed record's epoch
  std::vector<RoundFiles> round_files;           // per committed round: what retention left
  std::vector<RoundPrunedRecord> pruned_since_commit;  // round_pruned after the last commit
  // The rows next_round trains on: the table's rows less the dropped ones.
  uint64_t training_rows() const { return train_rows - std::min(dropped_rows, train_rows); }
  // Moves the progress past one more record, in journal order. O(1) in the records before it
  // (the supervisor applies each record it appends, not the whole journal again).
  void Apply(const nlohmann::json& record);
};
// Apply of every record, in order, from an empty RunProgress.
RunProgress ReplayJournal(const std::vector<nlohmann::json>& records);

}  // namespace ens
