// RunQueue: the bookkeeping of `ensembled serve` (orchestrator/serve/serve_daemon.h), no I/O.
//
// A ServedRun is one run config of the daemon's runs_dir. Its states and the one table of
// which state may move to which (anything else is refused with a Status and changes nothing):
//
//   queued   -> running     its ask was granted and its `ensembled run` child started
//   queued   -> cancelled   its file was removed, or `ensemblectl cancel`
//   queued   -> rejected    its ask can never be met by this machine
//   running  -> stopping    cancelled: SIGTERM sent to the child (a graceful stop)
//   running  -> finished    the child exited 0 and the run's journal says run_finished
//   running  -> failed      exit 78 (bad config or data: never restarted), or the restart budget spent
//   running  -> queued      the child crashed: restarted after a backoff (it keeps its place)
//   running  -> cancelled   the child exited 0 without finishing (stopped behind the daemon's back)
//   stopping -> cancelled   the child exited after the SIGTERM (its state directory is kept)
//   running  -> preempting  a run of a higher priority needs its grant: SIGTERM sent; its running
//                           members may finish within the daemon's preemption grace, then it is
//                           killed (its members in flight are trained again when it resumes)
//   preempting -> queued    its child is gone: it waits for its turn again and resumes from its
//                           own journal (the same bits as a run never preempted)
//   preempting -> finished / failed   it ended on its own meanwhile (its last round; exit 78)
//   preempting -> stopping  cancelled meanwhile
//   rejected: a config that does not validate, a duplicate run_name or state directory, an ask
//   the machine can never meet; it is never a run's way out of another state but this one.
//
// GrantPool: the daemon's GPUs (by UUID, else index) and CPU worker slots. A grant is whole
// GPUs, exclusively; or a share of GPUs' memory (resources.gpu_memory_gb): runs with shares
// are packed onto the same GPUs while the shares fit each GPU's memory (a share counts
// kGpuContextReserveBytes per worker besides gpu_memory_gb; orchestrator/gpu/gpu_share.h), a GPU
// with a share is not given whole and a GPU given whole takes no share; or CPU worker slots
// when the run uses no GPU. A run asks for named GPUs (a list, "auto") or for a count of them:
// any free ones, the lowest indices first (shares: the fullest GPU they fit on first, so whole
// GPUs stay free for whole asks).
// Order: runs that were running when the daemon stopped first (they resume), then the highest
// priority, then the oldest submission. A run whose ask does not fit now waits and the ones
// after it may start (a small run is not held up by a big one; a big one may wait long).
// Preemption (PreemptFor): the running runs whose grants a waiting run needs, lowest priority
// first and among equals the newest first, only those at least min_gap below it, and no more
// of them than it needs.
// Single-threaded.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/base/status.h"

namespace ens {

enum class RunState { kQueued, kRunning, kStopping, kPreempting, kFinished, kFailed, kCancelled, kRejected };
const char* RunStateName(RunState s);
// running, stopping, preempting: its child runs and it holds its grant.
bool HoldsGrant(RunState s);
// finished, failed, cancelled, rejected: nothing more happens to the run.
bool IsEnded(RunState s);

// One GPU the daemon may hand out.
struct ServeGpu {
  std::string id;     // what CUDA_VISIBLE_DEVICES gets: the UUID, else the index
  int index = 0;      // physical (nvidia-smi's) index
  uint64_t memory_bytes = 0;  // 0: unknown (no NVML; a MIG instance): takes no shares
};

// What a run asks: named GPUs (device ids of the daemon's), a count of any of them, or CPU
// worker slots.
struct RunAsk {
  std::vector<std::string> gpus;  // these GPUs (empty with gpu_count 0: a CPU run)
  int cpu_workers = 0;            // a CPU run's workers
  int gpu_count = 0;              // > 0: this many of the daemon's GPUs, whichever are free
  // > 0: this many bytes of each of its GPUs, shared with other runs' shares (the config's
  // gpu_memory_gb plus kGpuContextReserveBytes per worker on a GPU); 0: the GPUs whole.
  uint64_t gpu_share_bytes = 0;
};

// What a run was given. Same shape as its ask, but a grant always names its GPUs (gpu_count 0).
using Grant = RunAsk;

class GrantPool {
 public:
  GrantPool(std::vector<ServeGpu> gpus, int cpu_workers);
  const std::vector<ServeGpu>& gpus() const { return gpus_; }
  int cpu_workers() const { return cpu_workers_; }
  // The ask of a run config: gpus "none", or "auto" on a daemon without GPUs: its cpu_workers;
  // "auto": every GPU of the daemon; a list: those GPUs (indices or UUIDs/prefixes of the
  // daemon's); a count: that many, any of them; with gpu_memory_gb, a share of each.
  // InvalidArgument, naming the config's pointer, when the machine can never meet it (a GPU
  // the daemon does not have, more GPUs or CPU workers than it has, a share larger than a GPU
  // or on GPUs whose memory is unknown, a Slurm run).
  StatusOr<RunAsk> AskOf(const ResourcesSpec& r) const;
  // "" when the ask can be granted now, else why not ("needs 4 GPUs, 2 free").
  std::string WhyNotNow(const RunAsk& ask) const;
  // REQUIRES: WhyNotNow(ask) is "". A count takes the free GPUs of the lowest indices (a
  // share: those it fits on, the fullest first).
  Grant Take(const RunAsk& ask);
  void Release(const Grant& g);
  int free_cpu_workers() const { return cpu_workers_ - cpu_used_; }
  int free_gpus() const;  // GPUs with no grant at all
  // Bytes of the GPU held by shares now (0 for one given whole).
  uint64_t shared_bytes(const std::string& id) const;

 private:
  struct Use {
    bool whole = false;         // granted whole to one run
    uint64_t shared_bytes = 0;  // the shares granted on it
  };
  bool Fits(const ServeGpu& gpu, const RunAsk& ask) const;
  const ServeGpu* Find(const std::string& id) const;

  std::vector<ServeGpu> gpus_;
  int cpu_workers_;
  int cpu_used_ = 0;
  std::map<std::string, Use> use_;  // by id
};

struct ServedRun {
  std::string name;         // run_name (a rejected file that has none: its file name)
  std::string file;         // its config in runs_dir ("" once removed)
  std::string config_file;  // the effective config the child runs (paths resolved, state_dir set)
  std::string state_dir;
  RunState state = RunState::kQueued;
  int priority = 0;         // higher first. Default: 0
  uint64_t seq = 0;         // submission order, kept across daemon restarts
  uid_t submitter = 0;      // SO_PEERCRED of `ensemblectl submit`, or the file's owner
  RunAsk ask;
  Grant grant;
  std::string reason;              // why it waits, failed, was rejected or cancelled
  std::vector<ConfigError> errors; // rejected: every problem of its config
  bool resume_first = false;       // was running when the daemon stopped: starts before the rest
  int crashes = 0;                 // crashes in a row (a long run resets it)
  double not_before = 0;           // a crashed run's restart time (seconds on the daemon's clock)
  pid_t pid = 0;
  int rounds = 0;                  // rounds.count of its config
  int members = 0;                 // members per round
  int preemptions = 0;             // times it was preempted (journaled: kept across daemon restarts)
  // preempting: the run it makes room for; queued after that: the run that preempted it
  // (its waiting reason says so) until it starts again.
  std::string preempted_by;
  double kill_at = 0;              // preempting: when its grace ends (seconds on the daemon's clock)
  bool killed = false;             // preempting: SIGKILL sent after its grace
};

class RunQueue {
 public:
  explicit RunQueue(GrantPool pool) : pool_(std::move(pool)) {}
  GrantPool& pool() { return pool_; }
  const GrantPool& pool() const { return pool_; }

  // Moves `run` to `to` if the table allows it (else an error naming both states). Moving to
  // running takes its grant from the pool; moving out of running or stopping returns it.
  Status Move(ServedRun& run, RunState to);

  // The queued runs that can start now (their restart time come), in start order, each with
  // its grant taken and moved to running. Every queued run left gets its reason.
  // `now`: seconds on the caller's clock (the restart times' clock).
  std::vector<ServedRun*> StartNow(std::vector<ServedRun*> runs, double now);

  // The queued runs of `runs` in start order (the order StartNow tries them).
  static std::vector<ServedRun*> StartOrder(const std::vector<ServedRun*>& runs);

  // The running runs (state running) of `runs` to preempt so that `waiting`'s ask fits: those
  // with a priority at least min_gap below its own (min_gap >= 1), the lowest priority first,
  // then the newest; none it does not need. Empty when it fits already or no such set frees
  // enough.
  std::vector<ServedRun*> PreemptFor(const ServedRun& waiting, const std::vector<ServedRun*>& runs, int min_gap) const;

 private:
  GrantPool pool_;
};

// "2 GPUs (GPU-aa.., GPU-bb..)", "2 GPUs (any free)" (a count's ask), "2 CPU workers"; a
// share adds " with 4.5 GB each".
std::string DescribeGrant(const Grant& g);

}  // namespace ens
