// Executor: how the supervisor starts and signals worker processes.
//
// `LocalExecutor` (fork + exec on this machine) is the default; the interface is where a
// Slurm executor (tasks as job steps with --gres=gpu:1) fits. Thread-compatible.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ens {

struct WorkerLaunch {
  std::vector<std::string> argv;                            // argv[0] is the program path
  std::vector<std::pair<std::string, std::string>> set_env; // added/overridden
  std::vector<std::string> unset_env;                       // removed (NOTIFY_SOCKET, ...)
  // The worker's end of its WorkerChannel, handed to the child as kWorkerChannelFd (-1: none).
  // The caller keeps ownership and closes its copy after Start.
  int channel_fd = -1;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual StatusOr<pid_t> Start(const WorkerLaunch& launch) = 0;
  virtual void Signal(pid_t pid, int sig) = 0;
};

// fork + execve. The child gets its own process group (a terminal's Ctrl-C reaches only the
// supervisor, which stops workers in order) and PR_SET_PDEATHSIG=SIGKILL, so a worker never
// outlives a supervisor killed with SIGKILL.
class LocalExecutor : public Executor {
 public:
  StatusOr<pid_t> Start(const WorkerLaunch& launch) override;
  void Signal(pid_t pid, int sig) override;
};

}  // namespace ens
