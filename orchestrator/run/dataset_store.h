// DatasetStore: a run's data as published under state_dir/data (run_layout.h), and what the
// supervisor keeps of it in memory.
//
//   train    a DatasetWriter segment: generation 0 at the start, one generation more per
//            mutation (Append); rolled back on resume to the journal's last committed generation
//   holdout, pool   tables fixed at the start (segments, and data/*_x.npy for commands)
//   classes  classification: the run's classes (run.json), fixed at the start
//   pool_used       which pool rows a mutation has moved into train (as of the last commit)
//   excluded        train row ids dropped by mutations (sorted, unique), in excluded_file
//
// Publishing and appending write files; they never touch the journal. The caller journals what
// they report (run_started, round_committed, mutation_applied) and then calls MarkCommitted.
// Single-threaded (the supervisor's loop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/class_list.h"
#include "common/config/config.h"
#include "common/state/dataset_segment.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "common/base/status.h"
#include "common/base/table.h"
#include "orchestrator/run/mutation_policy.h"

namespace ens {

// What a round boundary's mutation did to the training segment.
struct AppliedMutation {
  uint64_t generation = 0;          // the generation it published
  std::vector<uint64_t> pool_ids;   // pool rows it moved into train
  std::string excluded_file;        // the dropped-rows file of that generation ("" = none)
  uint64_t added = 0;
  uint64_t dropped = 0;             // rows newly dropped by this mutation
  uint64_t dropped_rows = 0;        // rows dropped in all, this one included
};

class DatasetStore {
 public:
  explicit DatasetStore(RunLayout layout) : layout_(std::move(layout)) {}

  // A new run: streams the config's data into the segments (the supervisor never holds the
  // training table), writes run.json (run_id, names, classes) and the feature files.
  // `*started` receives run_started's data fields (not config_fingerprint).
  Status PublishFresh(const Config& cfg, const std::string& run_id, RunStartedRecord* started);
  // A resumed run: reopens the segments, rolls train back to `p`'s generation (rows appended
  // by a mutation whose round never committed), reads the classes, the used pool rows and
  // the dropped rows.
  Status Reopen(const Config& cfg, const RunProgress& p);
  // Appends `mut`'s pool rows and added rows to train as `generation`, and merges its drops
  // (writing the generation's excluded file when any row is newly dropped).
  // REQUIRES: generation is train's generation + 1.
  StatusOr<AppliedMutation> Append(const Mutation& mut, uint64_t generation);
  // The journal recorded `m`: its pool rows are used and its excluded file is current.
  void MarkCommitted(const AppliedMutation& m);

  const DatasetWriter& train() const { return *train_; }
  const Table& holdout() const { return holdout_; }
  const Table& pool() const { return pool_; }
  const ClassList& classes() const { return classes_; }
  const std::vector<bool>& pool_used() const { return pool_used_; }
  const std::vector<uint64_t>& excluded() const { return excluded_; }
  const std::string& excluded_file() const { return excluded_file_; }

 private:
  // data/holdout_x.npy and data/pool_x.npy, when missing.
  Status PublishFeatureFiles() const;
  Status ReadClasses();
  Status ReadExcluded();

  RunLayout layout_;
  std::unique_ptr<DatasetWriter> train_;
  Table holdout_, pool_;
  ClassList classes_;
  std::vector<bool> pool_used_;
  std::vector<uint64_t> excluded_;
  std::string excluded_file_;
};

}  // namespace ens
