#include <signal.h>

#include <algorithm>
#include <random>

#include "common/ipc/worker_channel.h"
#include "orchestrator/workers/executor.h"
#include "orchestrator/workers/executor_factory.h"
#include "orchestrator/workers/transport.h"

namespace ens {

uint64_t NewSpawnToken() {
  static std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  uint64_t t = 0;
  while (t == 0) t = rng();
  return t;
}

StatusOr<WorkerHandle> LocalExecutor::Start(const WorkerLaunch& launch) {
  if (launch.argv.empty()) return Status::InvalidArgument("empty worker argv");
  if (launch.token == 0) return Status::InvalidArgument("a worker launch without a spawn token");
  SubprocessSpec spec;
  spec.argv = launch.argv;
  spec.set_env = launch.set_env;
  spec.unset_env = launch.unset_env;
  // Its own session: whatever a worker starts (a command member's program in a group of its
  // own, and that program's children) is found by session when the worker is gone.
  spec.new_session = true;
  spec.die_with_parent = true;
  spec.pass_fd = launch.channel_fd;
  spec.pass_fd_as = kWorkerChannelFd;
  auto child = Subprocess::Start(spec);
  if (!child.ok()) return child.status();
  WorkerHandle h;
  h.token = launch.token;
  h.pid = child->pid();
  h.where = "pid " + std::to_string(h.pid);
  children_[launch.token] = std::move(*child);
  return h;
}

void LocalExecutor::Signal(const WorkerHandle& worker, int sig) {
  auto it = children_.find(worker.token);
  if (it == children_.end()) return;
  // The worker alone, not its group: a worker's own children (none today) are its business;
  // PR_SET_PDEATHSIG covers the supervisor's death.
  if (it->second.pid() > 0 && !it->second.Exited()) ::kill(it->second.pid(), sig);
}

std::vector<WorkerExit> LocalExecutor::PollExits() {
  std::vector<WorkerExit> out;
  for (auto it = children_.begin(); it != children_.end();) {
    if (!it->second.HasEnded()) {
      ++it;
      continue;
    }
    KillSession(it->second);
    it->second.Wait();
    out.push_back({it->first, it->second.exit(), it->second.exit().Describe()});
    it = children_.erase(it);
  }
  return out;
}

// What a dead worker left in its session (a command member's program and its children): the
// worker is unreaped here, so its pid, the session id, cannot have been reused.
void LocalExecutor::KillSession(Subprocess& worker) {
  for (int pass = 0; pass < 10; ++pass) {
    std::vector<pid_t> left = SessionProcesses(worker.pid());
    left.erase(std::remove(left.begin(), left.end(), worker.pid()), left.end());
    if (left.empty()) return;
    for (pid_t p : left) ::kill(p, SIGKILL);
  }
}

void LocalExecutor::Release() {
  for (auto& [token, child] : children_) {
    child.Signal(SIGKILL);
    KillSession(child);
  }
  children_.clear();  // each Subprocess reaps its child
}

StatusOr<ExecutorSetup> SetUpLocalExecutor(const ExecutorContext& ctx) {
  auto slots = ctx.plan_local_slots();
  if (!slots.ok()) return slots.status();
  ExecutorSetup setup{nullptr, nullptr, std::move(*slots)};
  if (!ctx.slots_only) {
    setup.executor = std::make_unique<LocalExecutor>();
    setup.transport = std::make_unique<LocalTransport>();
  }
  return setup;
}

}  // namespace ens
