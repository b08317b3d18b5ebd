// The queue journal of `ensembled serve`: <state_root>/.serve/queue.jsonl, written with
// common/state/journal.h (one JSON object per line, fsynced before Append returns; a torn last line
// is dropped on open). It is what the daemon knows after a crash: which runs were submitted, in
// which order and with which priority, which were running, and which have ended.
//
// Records ("event" field):
//   submitted {run, file, priority, seq, uid}   a run accepted into the queue
//   started   {run, gpus, cpu_workers, pid}      its `ensembled run` child started
//   preempted {run, by, reason}                 its child stopped for run `by` (preemption): it is
//                                                queued again, not among those that resume first
//   ended     {run, state, reason}               finished | failed | cancelled: nothing more
//                                                happens to it (a later `submitted` of the same
//                                                name is a new run)
// Rejected configs are not journaled: the daemon re-reads runs_dir when it starts.
// Pure functions. Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ens {

// One run as the journal leaves it.
struct JournaledRun {
  std::string name, file;
  int priority = 0;
  uint64_t seq = 0;
  uid_t uid = 0;
  bool started = false;      // a `started` after its last `submitted` and `preempted`
  int preemptions = 0;       // `preempted` records since its last `submitted`
  bool ended = false;
  std::string end_state;     // "finished" | "failed" | "cancelled" when ended
  std::string end_reason;
};

struct ServeJournalState {
  std::map<std::string, JournaledRun> runs;  // by name: the last submission of each
  uint64_t next_seq = 1;
};

ServeJournalState ReplayServeJournal(const std::vector<nlohmann::json>& records);

nlohmann::json SubmittedRecord(const std::string& run, const std::string& file, int priority, uint64_t seq, uid_t uid);
nlohmann::json StartedRecord(const std::string& run, const std::vector<std::string>& gpus, int cpu_workers, pid_t pid);
nlohmann::json PreemptedRecord(const std::string& run, const std::string& by, const std::string& reason);
nlohmann::json EndedRecord(const std::string& run, const std::string& state, const std::string& reason);

}  // namespace ens
