// Executor: how the supervisor starts, signals and watches worker processes, wherever they run.
//
// The supervisor knows a worker only by its WorkerHandle: an opaque spawn token (random, never
// reused: a leftover worker of an earlier supervisor can never pass for a new one) plus what the
// executor can say about where it runs. Implementations:
//   LocalExecutor  (this file)              fork + exec here (common/base/subprocess.h); workers
//                                           reach the supervisor over a socket pair
//   SlurmExecutor  (slurm_executor.h)        one sbatch pilot job per worker; workers connect
//                                           back over TCP (transport.h)
//   FakeExecutor   (tests/support)           in-process, for the round logic's tests
// Contract, for every implementation:
//  - Start returns once the worker is on its way (a local process exec'd, a job accepted).
//    A failure that no retry can fix (bad partition, no such program) is InvalidArgument or
//    NotFound, which stop the run with exit 78; others are retried by the pool.
//  - PollExits never blocks and reports each started worker's end exactly once, whatever the
//    cause (exit, signal, job cancelled, node lost, time limit).
//  - Signal(SIGTERM) asks a worker to stop; Signal(SIGKILL) makes sure it is gone (its exit
//    still comes through PollExits).
//  - Release() ends everything this executor started for the run (the run is over or stopping).
// Single-threaded: driven by the supervisor loop.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/base/subprocess.h"

namespace ens {

struct WorkerLaunch {
  std::vector<std::string> argv;                            // argv[0] is the program path
  std::vector<std::pair<std::string, std::string>> set_env; // added/overridden
  std::vector<std::string> unset_env;                       // removed (NOTIFY_SOCKET, ...)
  // The worker's end of its WorkerChannel, handed to the child as kWorkerChannelFd (-1: none;
  // remote workers connect back instead). The caller keeps ownership and closes it after Start.
  int channel_fd = -1;
  uint64_t token = 0;  // spawn token, chosen by the caller (NewSpawnToken)
  int slot = 0;
};

struct WorkerHandle {
  uint64_t token = 0;  // 0: no worker
  pid_t pid = 0;       // a local process id (0 when the worker runs elsewhere)
  std::string where;   // for messages: "pid 4242", "Slurm job 57"
  bool valid() const { return token != 0; }
};

struct WorkerExit {
  uint64_t token = 0;
  ExitInfo exit;
  std::string how;  // "exited with 1", "Slurm job 57 CANCELLED", ...
};

// A fresh random spawn token (never 0).
uint64_t NewSpawnToken();

class Executor {
 public:
  virtual ~Executor() = default;
  // Once, before the first Start: checks that workers can be started at all, and clears what
  // an earlier supervisor of the same run left behind. Errors stop the run.
  virtual Status Prepare(const std::string& run_id) { return Status::Ok(); }
  virtual StatusOr<WorkerHandle> Start(const WorkerLaunch& launch) = 0;
  virtual void Signal(const WorkerHandle& worker, int sig) = 0;
  virtual std::vector<WorkerExit> PollExits() = 0;
  virtual void Release() {}
  // Whether workers connect back over the network (TCP transport) instead of a socket pair.
  virtual bool remote() const { return false; }
  virtual std::string name() const = 0;  // "local", "slurm"
};

// Workers as local child processes: own session and process group (a terminal's Ctrl-C reaches
// only the supervisor, which stops workers in order), PR_SET_PDEATHSIG=SIGKILL (a worker never
// outlives a supervisor killed with SIGKILL), the channel at fd 3. When a worker is gone (or
// released), everything left in its session is killed: a command member's program and its
// children do not outlive the worker that ran them.
class LocalExecutor : public Executor {
 public:
  StatusOr<WorkerHandle> Start(const WorkerLaunch& launch) override;
  void Signal(const WorkerHandle& worker, int sig) override;
  std::vector<WorkerExit> PollExits() override;
  void Release() override;
  std::string name() const override { return "local"; }

 private:
  static void KillSession(Subprocess& worker);
  std::map<uint64_t, Subprocess> children_;
};

}  // namespace ens
