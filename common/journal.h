// Journal: the append-only record of a run, one JSON object per line (journal.jsonl).
//
// Each Append writes one line and fsyncs before returning: a record that Append returned for
// is durable. AppendBatch does the same for many lines at the cost of one fsync. A supervisor killed mid-write leaves at most one torn last line, which Open
// drops (and truncates away); a bad line anywhere else is corruption, reported with its
// line number, never guessed around.
//
// Records ("event" field):
//   run_started     {config_fingerprint, features, train_rows, holdout_rows, pool_rows}
//   member_done     {round, member, index, attempt, slot, pid, metrics}
//   member_failed   {round, member, index, attempt, error, permanent}
//   round_committed {round, trained_rows, generation, train_rows, dropped_rows, pool_used:[ids],
//                    excluded_file, summary}: trained_rows is what the round trained on (net
//                    of drops); train_rows and dropped_rows describe the next generation's
//                    table (all its rows, and how many of them are dropped)
//   mutation_applied {round, generation, train_rows, dropped_rows, pool_used, excluded_file, ...}
//   config_changed  {epoch, from_round, fingerprint, changes}: a resume accepted a config that
//                    changes results (`--accept-config-change`): a new config epoch
//   run_extended    {from_rounds, to_rounds}: a finished run resumed with more rounds
//   run_finished    {rounds, reason}
// A Journal is move-only and single-threaded (the supervisor's loop).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ens {

class Journal {
 public:
  // Opens (creating if absent, 0600) and reads every record.
  static StatusOr<std::unique_ptr<Journal>> Open(const std::string& path);
  ~Journal();

  // Adds "time" (unix seconds) and appends durably.
  Status Append(nlohmann::json record);
  // Appends every record with one write and one fdatasync (a pack's member_done records):
  // after an ok, all are durable; a crash mid-way leaves a prefix of them (and at most one
  // torn line, dropped on Open). On error none is in records().
  Status AppendBatch(std::vector<nlohmann::json> batch);
  const std::vector<nlohmann::json>& records() const { return records_; }
  // Lines dropped as torn when opening (0 or 1).
  int torn_lines_dropped() const { return torn_; }

 private:
  Journal(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
  int torn_ = 0;
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
  std::map<std::string, nlohmann::json> done;    // next_round: member name -> member_done record
  std::map<std::string, nlohmann::json> failed;  // next_round: member name -> last member_failed
  std::vector<nlohmann::json> committed;         // round_committed records, in order
  int config_epoch = 0;                          // the last config_changed record's epoch
  // The rows next_round trains on: the table's rows less the dropped ones.
  uint64_t training_rows() const { return train_rows - std::min(dropped_rows, train_rows); }
};
RunProgress ReplayJournal(const std::vector<nlohmann::json>& records);

}  // namespace ens
