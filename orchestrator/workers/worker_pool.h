// WorkerPool: the supervisor's worker slots, their processes and their channels.
//
// One WorkerSlot per placement. A slot's state moves only through NextSlotState, the one table
// that says which event moves which state where (worker_pool.cpp, kSlotMoves):
//   kDown     --spawned-->          kStarting
//   kDown     --start failed-->     kDown      (respawned after 2 s)
//   kStarting --"ready"-->          kIdle
//   kIdle     --assigned-->         kBusy      (one task, or a fused pack reported task by task)
//   kBusy     --reported-->         kIdle      (the last task's "done"/"failed"; events go to the supervisor)
//   kBusy     --reported, recycle--> kStopping (no new task; respawned at once when it exits)
//   kStarting/kIdle/kBusy/kStopping --process exits--> kDown (a Busy slot's tasks come back as kLost)
//   kStarting/kIdle/kBusy --shutdown--> kStopping;  any but kUnusable --released--> kDown
//   kDown, kStarting --given up--> kUnusable, for good (never respawned; Unusable() says why and
//                                   the supervisor stops the run with exit 78). Given up: the
//                                   worker said "unusable" (its placement cannot work: its GPU
//                                   is not what CUDA sees) or exited 78 before "ready"; it died
//                                   before "ready" kSlotStartBudget times in a row (a worker that
//                                   crashes at start is not respawned every second forever); or
//                                   the executor called its start hopeless (InvalidArgument or
//                                   NotFound: a program that cannot be executed, a job sbatch
//                                   refuses). A kUnusable slot's process, if any, is still reaped.
// An event a state has no move for is ignored (a second "ready", a late message); timers are
// not events: a busy slot silent past heartbeat_timeout_s gets SIGTERM, and SIGKILL after
// kill_grace_s; a slot whose worker died within 10 s of starting waits 1 s before its respawn.
// Each worker process talks over its own WorkerChannel: a socket pair made when it is spawned
// (local), or the TCP connection it opens back and proves with its spawn token (remote,
// transport.h); the supervisor waits on all of them, and on the transport's listener, through
// one epoll descriptor. Workers are known by their WorkerHandle; their exits come from the
// executor (executor.h), whichever way they ended. A remote worker's slot is not watched by the
// heartbeat timeout before it connects (its job may wait in the scheduler's queue). A slot's messages are read
// before its exit is handled, so a report sent just before a worker exits still counts.
// Messages are decoded and validated; a bad one (including one naming another slot) is
// logged, counted and ignored. One from a pid that is not the slot's worker is ignored.
// Single-threaded: owned and driven by the supervisor loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"
#include "common/ipc/protocol.h"
#include "common/ipc/worker_channel.h"
#include "common/base/status.h"
#include "orchestrator/workers/executor.h"
#include "orchestrator/gpu/gpu_discovery.h"
#include "orchestrator/workers/transport.h"

namespace ens {

enum class SlotState { kDown, kStarting, kIdle, kBusy, kStopping, kUnusable };
enum class SlotEvent { kSpawned, kStartFailed, kReady, kAssigned, kReported, kReportedRecycle, kExited, kGivenUp,
                       kShutdown, kReleased };
// The slot state `event` moves `from` to; nullopt when the event does not apply there.
std::optional<SlotState> NextSlotState(SlotState from, SlotEvent event);

// Consecutive failed starts (a worker dead, or not startable, before "ready") after which a slot
// is given up and the run stops with exit 78. A worker that once said ready resets the count.
inline constexpr int kSlotStartBudget = 10;
const char* SlotStateName(SlotState s);

struct WorkerSlot {
  using Clock = std::chrono::steady_clock;
  WorkerPlacement placement;
  SlotState state = SlotState::kDown;
  WorkerHandle handle;  // the current worker (executor.h); invalid when there is none
  pid_t pid = 0;        // its process id as far as known (a remote worker's, from its messages)
  bool linked = false;  // its channel was connected (remote workers connect some time after start)
  std::vector<TaskSpec> tasks;  // given and not yet reported (several for a fused pack), any order
  std::unordered_map<std::string, size_t> task_index;  // task_id -> position in tasks
  Clock::time_point started_at{}, last_heard{}, respawn_at{};
  Clock::time_point link_lost_at{};  // when its channel reported the end of stream
  Clock::time_point term_sent{};  // hung: when SIGTERM went out (SIGKILL follows after a grace period)
  int spawns = 0;
  int tasks_done = 0;        // since this process started
  int recycles = 0;          // planned replacements (recycle policy)
  bool recycling = false;    // the current process announced it exits after its report
  std::string unusable;      // kUnusable: why the slot was given up ("" until then)
  int failed_starts = 0;     // consecutive processes that died (or could not start) before "ready"
  int64_t rss_kb = 0;
  double gpu_reserved_mb = 0;
  TaskPhase phase = TaskPhase::kSetup;  // busy: what its last heartbeat said
  WorkerChannel channel;     // the supervisor's end of the current process's link
};

struct PoolEvent {
  enum Kind { kDone, kFailed, kLost } kind = kDone;
  int slot = 0;
  pid_t pid = 0;
  TaskSpec task;
  nlohmann::json metrics;
  std::string error;
  bool permanent = false;
  // kLost: SIGKILL that ensembled did not send (the kernel's out-of-memory killer, or an operator).
  bool killed_unasked = false;
};

struct PoolOptions {
  std::string run_id;
  std::string worker_binary;
  int threads_per_worker = 1;
  double heartbeat_timeout_s = 60;  // busy slot silent this long: SIGTERM, then SIGKILL, task retried
  double kill_grace_s = 5;          // SIGTERM -> SIGKILL
  RecycleSpec recycle;              // passed to every worker
  std::string pack_dir;             // where pack files are written (one per slot)
};

class WorkerPool {
 public:
  // Neither executor nor transport is owned; both outlive the pool.
  WorkerPool(Executor* executor, Transport* transport, PoolOptions opts, std::vector<WorkerPlacement> placements);
  ~WorkerPool();

  // Fits the process limits to the slots (process_limits.h) and spawns every slot.
  // InvalidArgument when the limits can never fit them (a restart cannot help).
  Status Start();
  // fd that becomes readable when a worker reports or exits (for the supervisor's poll()).
  int report_fd() const { return epoll_fd_; }
  // Reads every pending report and reaps exited workers; respawns slots whose backoff passed;
  // kills busy workers silent past the heartbeat timeout. Returns task outcomes.
  std::vector<PoolEvent> Service();
  // Gives a task, or a fused pack of tasks, to an idle slot; false when none is idle.
  bool Assign(const std::vector<TaskSpec>& tasks);
  bool AllReady() const;
  int IdleCount() const;
  int BusyCount() const;
  int bad_messages() const { return bad_messages_; }
  int unplanned_restarts() const { return unplanned_restarts_; }
  // The first slot whose placement cannot work: "slot N (GPU id): why"; "" when none.
  std::string Unusable() const;
  const std::vector<WorkerSlot>& slots() const { return slots_; }
  // Asks every worker to exit, waits up to timeout_s, then SIGKILLs the rest; closes channels.
  void Shutdown(double timeout_s);
  // Reload: new heartbeat timeout now, new recycle policy for workers started from now on.
  void UpdateOptions(double heartbeat_timeout_s, const RecycleSpec& recycle) {
    opts_.heartbeat_timeout_s = heartbeat_timeout_s;
    opts_.recycle = recycle;
  }

 private:
  void Spawn(WorkerSlot& s);
  // Moves s by the transition table; false (state unchanged) when the event does not apply.
  bool Move(WorkerSlot& s, SlotEvent event);
  // s cannot work: kUnusable with `why`, unless it was given up already.
  void GiveUp(WorkerSlot& s, std::string why);
  // Reads what the slot's worker sent (at most a bounded number of messages per call).
  void Drain(WorkerSlot& s, std::vector<PoolEvent>* events);
  void Disconnect(WorkerSlot& s);
  void HandleMessage(const std::string& bytes, WorkerSlot& from, std::vector<PoolEvent>* events);
  void Reap(std::vector<PoolEvent>* events);

  void Attach(WorkerSlot& s, WorkerChannel channel);
  void HandleExit(WorkerSlot& s, const WorkerExit& exit, std::vector<PoolEvent>* events);

  Executor* executor_;
  Transport* transport_;
  PoolOptions opts_;
  std::vector<WorkerSlot> slots_;
  int epoll_fd_ = -1;  // every slot's channel; event data is the slot's index in slots_
  int bad_messages_ = 0;
  int unplanned_restarts_ = 0;
};

}  // namespace ens
