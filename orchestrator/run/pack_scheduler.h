// PackScheduler: the state of every pack of one round, and the one place that says which
// event moves a pack's state where.
//
// A round's members are cut into packs (pack_plan.h); a pack is the dispatch unit. One attempt
// of a pack runs on one worker at a time and owes one report per member task it carried
// (done, failed, or lost with its worker: WorkerPool reports each task of a dead worker).
// A pack's states, and the only legal transitions (PackScheduler::Next is this table; any other
// pair is refused with Status::Internal and changes nothing):
//
//   kQueued       --kDispatched-->     kInFlight     its undecided members go to one worker
//   kQueued       --kStopRequested-->  kHeld
//   kInFlight     --kReported-->       kInFlight     a member reported; more reports are owed
//   kInFlight     --kRetryDecided-->   kRetryPending a transient failure with attempts left
//   kInFlight     --kSettled-->        kDone         last report owed; every member decided
//   kInFlight     --kStopRequested-->  kDraining
//   kRetryPending --kReported-->       kRetryPending pack-mates' reports of the old attempt count
//   kRetryPending --kAttemptEnded-->   kQueued       last report owed; now it is known which
//                                                    members are decided, so the retry may start
//   kRetryPending --kSettled-->        kDone         (every member decided after all)
//   kRetryPending --kStopRequested-->  kDraining
//   kDraining     --kReported-->       kDraining     reports still count (done members are kept)
//   kDraining     --kRetryDecided-->   kDraining     noted (logged, counted), never started
//   kDraining     --kSettled-->        kDone
//   kDraining     --kAttemptEnded-->   kHeld         undecided members wait for the next run
//   kDraining     --kStopRequested-->  kDraining     (a second stop)
//   kHeld         --kStopRequested-->  kHeld
//   kDone         --kStopRequested-->  kDone
// A stop is for the whole round and final: once asked, nothing is ever kQueued again, so
// nothing new starts, while packs in flight finish (the supervisor decides how long to wait).
// Pausing is not a pack state: the supervisor just does not ask for the next dispatch.
//
// Member reports are turned into those events by the member rules (OnReport), the same rules
// the supervisor has always applied:
//  - done: the member is decided (done); a report about a decided member changes nothing.
//  - failed permanently: only that member fails (decided), never retried, even if its pack's
//    attempt was already retried; its pack-mates report for themselves.
//  - lost with a SIGKILL ensembled did not send, in every attempt including the last
//    (attempt >= max_attempts): most likely the kernel's out-of-memory killer; counts as
//    permanent (ReportVerdict::out_of_memory), since a restart cannot help.
//  - failed or lost transiently, attempt < the pack's current attempt: the attempt was already
//    retried and the member is in the retry; nothing changes (stale).
//  - failed or lost transiently, attempt < max_attempts: kRetryDecided; the pack runs again
//    at attempt + 1, less the members decided by then (a member's bits do not depend on its
//    pack, and a journaled member is never trained again).
//  - failed or lost transiently, attempt >= max_attempts: that member fails (decided); its
//    pack-mates are decided by their own reports of the same attempt.
// Then kReported, or, for the attempt's last owed report, kSettled or kAttemptEnded.
// A retry waits in the queue behind what was queued before it (first in, first out).
//
// No I/O, no WorkerPool, no clock: RunRound feeds it and does the journaling and logging.
// Single-threaded.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"

namespace ens {

enum class PackState { kQueued, kInFlight, kRetryPending, kDraining, kHeld, kDone };
enum class PackEvent { kDispatched, kReported, kRetryDecided, kAttemptEnded, kSettled, kStopRequested };
inline constexpr int kPackStateCount = 6;
inline constexpr int kPackEventCount = 6;
const char* PackStateName(PackState s);
const char* PackEventName(PackEvent e);

// A member's standing in the round: undecided until its report (or its last attempt's report)
// decides it.
enum class MemberState { kUndecided, kDone, kFailed };

// One report from a worker about one member task.
struct MemberReport {
  enum Kind { kDone, kFailed, kLost } kind = kDone;
  int member = 0;     // index into the config's members
  int attempt = 1;    // the attempt the task was sent with
  bool permanent = false;        // kFailed: retrying cannot help
  bool killed_unasked = false;   // kLost: SIGKILL that ensembled did not send
};

// What the supervisor does with a report.
struct ReportVerdict {
  enum Outcome {
    kIgnored,    // about a decided member, or a transient failure of an attempt already retried
    kDone,       // the member succeeded: record it
    kRetry,      // transient; the pack runs again (not while draining: then the next run does)
    kGaveUp,     // transient, out of attempts: the member failed
    kPermanent,  // the member failed for good, not retried
  } outcome = kIgnored;
  bool out_of_memory = false;  // kPermanent because of SIGKILLs not ours in every attempt
  Status status;               // not ok: the report was illegal here and changed nothing
};

// What to hand a worker next.
struct PackDispatch {
  int pack = 0;
  int attempt = 1;
  std::vector<int> members;  // the pack's undecided members, in pack order
};

class PackScheduler {
 public:
  // The transition table: the state `event` moves `from` to, or nullopt when illegal.
  static std::optional<PackState> Next(PackState from, PackEvent event);

  // packs: member indices per pack (PlanPacks). done: members journaled done before this
  // round ran (a resumed round); a pack of only those is kDone at once, the others kQueued at
  // attempt 1 in pack order. max_attempts: Config::max_task_attempts.
  // InvalidArgument unless every member in [0, members) is in exactly one non-empty pack and
  // done has `members` entries.
  static StatusOr<PackScheduler> Create(std::vector<std::vector<int>> packs, size_t members,
                                        const std::vector<bool>& done, int max_attempts);
  PackScheduler() = default;

  // The first kQueued pack in queue order, with its undecided members; nullopt when none is
  // (everything in flight, waiting for a pack-mate's report, held by a stop, or done).
  std::optional<PackDispatch> NextDispatch() const;
  // A worker took NextDispatch()'s pack: kQueued -> kInFlight, its members' attempt recorded,
  // one report owed per member sent.
  Status Dispatched(int pack);
  // Applies a worker's report; see the member rules above.
  ReportVerdict OnReport(const MemberReport& report);
  // The round stops: kQueued packs are held, packs in flight drain. Idempotent.
  void RequestStop();

  bool stopping() const { return stopping_; }
  // Every pack kDone: every member decided.
  bool Complete() const;
  PackState state(int pack) const { return packs_[static_cast<size_t>(pack)].state; }
  int pack_count() const { return static_cast<int>(packs_.size()); }
  int pack_of(int member) const { return pack_of_[static_cast<size_t>(member)]; }
  size_t pack_size(int pack) const { return packs_[static_cast<size_t>(pack)].members.size(); }
  // Reports the pack's attempt in flight still owes (0 when none is in flight).
  int reports_owed(int pack) const { return packs_[static_cast<size_t>(pack)].owed; }
  // The attempt queued or in flight (after a retry: the retry's).
  int current_attempt(int pack) const { return packs_[static_cast<size_t>(pack)].current_attempt; }
  MemberState member_state(int member) const { return members_[static_cast<size_t>(member)].state; }
  bool decided(int member) const { return member_state(member) != MemberState::kUndecided; }
  // The last attempt the member was sent with (0: never sent this round).
  int attempts(int member) const { return members_[static_cast<size_t>(member)].attempts; }
  size_t done_count() const { return done_; }
  size_t failed_count() const { return failed_; }
  // Some member failed permanently (decides the round's exit code: 78, not 1).
  bool any_permanent() const { return any_permanent_; }

 private:
  struct Pack {
    std::vector<int> members;
    PackState state = PackState::kQueued;
    int current_attempt = 1;     // queued or in flight
    int dispatched_attempt = 0;  // the attempt whose reports are owed
    int owed = 0;
  };
  struct Member {
    MemberState state = MemberState::kUndecided;
    int attempts = 0;
    int unasked_kills = 0;  // attempts lost to a SIGKILL not ours
  };
  Status Apply(int pack, PackEvent event);
  void Decide(int member, MemberState state);

  std::vector<Pack> packs_;
  std::vector<Member> members_;
  std::vector<int> pack_of_;
  std::deque<int> queue_;  // kQueued and kRetryPending packs, first in first out
  int max_attempts_ = 1;
  size_t done_ = 0, failed_ = 0;  // members
  size_t packs_done_ = 0;
  bool any_permanent_ = false;
  bool stopping_ = false;
};

}  // namespace ens
