// JournalFollower: where a run stands (RunProgress), kept up to date with a journal that another
// process appends to, reading only what was appended since the last look. `ensembled serve`
// describes each run it serves this way on every pass of its loop: the cost of a look is the
// new records, not the run's whole history.
//
// Update reads the complete lines appended since the last call and applies each to progress()
// (RunProgress::Apply, as a replay would). A last line without its newline (a record being
// written, or torn by a crash) is left for a later call. A file that shrank (a restarted
// supervisor cut a torn line away) or was replaced (another inode) is read again from its
// start. A complete line that is not a record stops the reading there (Corruption, naming the
// file and line); nothing after it is applied. The journal is opened as common/base/no_follow.h
// opens another user's file: no link followed, no FIFO waited on, `check`'s owner and size
// (a follower of the daemon's reads a submitter's state directory). Not thread-safe; one per
// journal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/state/journal.h"
#include "common/base/no_follow.h"
#include "common/base/status.h"

namespace ens {

class JournalFollower {
 public:
  explicit JournalFollower(std::string path, FileCheck check = {}) : path_(std::move(path)), check_(check) {}

  // NotFound when the journal does not exist (yet); progress() is then as before.
  Status Update();
  const RunProgress& progress() const { return progress_; }
  // Bytes of the journal applied so far (the next read starts there).
  uint64_t offset() const { return offset_; }

 private:
  void Reset();
  std::string path_;
  FileCheck check_;
  uint64_t offset_ = 0;
  int lines_ = 0;  // complete lines applied (for the line number of an error)
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  RunProgress progress_;
};

}  // namespace ens
