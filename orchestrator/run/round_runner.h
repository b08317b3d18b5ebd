// RoundRunner: one round's members, from dispatch to the journal.
//
// It plans the round's packs (pack_plan.h) and drives PackScheduler: hands packs to idle
// workers, turns the pool's reports into journal records and decides each member (done,
// retried, failed). Pipelined: a worker that reports gets its next task at once, before its
// members are journaled. member_done records wait in a batch until no task is running or the
// oldest has waited kMaxBatchWait, and go to the journal with one fdatasync: O(1) fsyncs per
// round of short tasks (at most one a second while tasks keep finishing), not one per task or
// pack. A member is "done" for the run (RoundHost::MemberJournaled) only once its record is
// durable; a crash loses at most the batch, whose members the resumed run retrains to the
// same bits.
//
// Stopping: after a first stop request nothing new starts; the round ends kStopped when the
// workers are idle or the stop is overdue, after journaling what finished. When a journal write
// of finished members fails, while stopping or not, the round ends kFailed with an I/O error (a
// restart mends it: exit 1) naming how many finished members are not recorded: their
// directories are written, and the resumed run trains them again to the same bits.
//
// What the round needs of the run around it (signals, the control socket, the status file,
// the task each member gets) comes through RoundHost, which the supervisor implements.
// Single-threaded; one RoundRunner per round.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/state/journal.h"
#include "common/state/member_result.h"
#include "common/ipc/protocol.h"
#include "common/base/status.h"
#include "orchestrator/run/pack_scheduler.h"
#include "orchestrator/workers/worker_pool.h"

namespace ens {

enum class RoundEnd { kComplete, kStopped, kFailed };

// The longest a finished member's record waits for its batch's fdatasync while tasks keep
// finishing.
inline constexpr std::chrono::milliseconds kMaxBatchWait{1000};

class RoundHost {
 public:
  virtual ~RoundHost() = default;
  enum class Stop { kNone, kRequested, kOverdue };  // kOverdue: stop_timeout_s has passed
  virtual Stop StopState() const = 0;
  virtual bool Paused() const = 0;
  // Besides the pool's report fd, the descriptors the round's wait also wakes for (control
  // socket, signalfd). Negative entries are skipped.
  virtual std::vector<int> WaitFds() const = 0;
  // Once per pass of the round's loop, after the wait: signals, control requests, watchdog,
  // status. `failed` is the round's failed members so far. False: the round must stop now.
  virtual bool Tick(size_t failed) = 0;
  virtual TaskSpec MakeTask(int round, int index, int attempt) const = 0;
  // A member_done record is durable (printed, counted, shown). `result` is what the round read
  // of the member's directory at its report (metrics and predictions), the host's to keep for
  // the round's commit: read once a round, not twice.
  virtual void MemberJournaled(const MemberDoneRecord& record, const std::string& out_dir, MemberResult result) = 0;
  // A member_failed record is durable; a retry is decided (counters).
  virtual void MemberFailedJournaled() = 0;
  virtual void MemberRetried() = 0;
};

// The round's inputs that do not change while it runs.
struct RoundShape {
  int round = 0;
  int features = 0;               // of the round's training table
  uint64_t train_rows = 0;        // rows of the round's training table (pack plan sizing)
  int classes = 0;                // the run's classes (0: regression) and regression targets:
  int targets = 1;                // which members the lane kernel trains (pack plan on GPUs)
  size_t holdout_values = 0;      // floats in a member's holdout predictions
  size_t pool_values = 0;         // floats in a member's pool predictions
  std::vector<bool> done_before;  // per member: journaled done before this round (ran) here
};

class RoundRunner {
 public:
  RoundRunner(const Config& cfg, RoundShape shape, WorkerPool* workers, Journal* journal, RoundHost* host)
      : cfg_(cfg), shape_(std::move(shape)), workers_(workers), journal_(journal), host_(host) {}
  // Runs the round until every member is decided and journaled, a stop, or a failure that
  // ends the run (*error set: its code decides the exit code).
  RoundEnd Run(Status* error);

 private:
  struct DoneRecord {
    MemberDoneRecord rec;
    std::string out_dir;
    MemberResult result;
  };
  void DispatchIdle();
  void Wait() const;
  // One report of the pool. Non-ok: the journal refused a record (the round fails).
  Status HandleEvent(PoolEvent& e);
  Status JournalFailure(const PoolEvent& e, const std::string& name);
  // Journals the waiting member_done records as one batch. On failure, an I/O error (a restart
  // mends it) starting with `when` and saying whose results are not recorded.
  Status FlushDone(const std::string& when);
  bool FlushDue() const;
  RoundEnd Stopped(Status* error);
  // After every member is decided: whether enough succeeded (min_members).
  RoundEnd Outcome(Status* error) const;

  const Config& cfg_;
  RoundShape shape_;
  WorkerPool* workers_;
  Journal* journal_;
  RoundHost* host_;
  PackScheduler sched_;
  std::string first_failure_;
  std::vector<DoneRecord> done_batch_;
  std::chrono::steady_clock::time_point batch_started_;
};

}  // namespace ens
