// ExecutorFactory: the Executor of a run's resources.executor, the Transport its workers talk
// over, and the worker slots it gets. One case a kind in executor_factory.cpp; each kind's
// setup lives in its own file (orchestrator/<kind>_executor.cpp, which CMake picks up by that
// name; ARCHITECTURE.md "How to add ...").
//   local  LocalExecutor + LocalTransport; the slots are this host's GPUs as planned
//          (ExecutorContext::plan_local_slots)
//   slurm  SlurmExecutor + TcpTransport listening for its workers; slurm.workers slots, each
//          job's GPUs chosen by Slurm
// Errors: InvalidArgument/NotFound for what no retry can fix (exit 78), others transient.
// Single-threaded: called once by the supervisor before its workers start.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/base/status.h"
#include "orchestrator/workers/executor.h"
#include "orchestrator/gpu/gpu_discovery.h"
#include "orchestrator/workers/transport.h"

namespace ens {

struct ExecutorContext {
  const Config* config = nullptr;
  std::string run_id;
  std::string state_root;  // the state directory, absolute
  // Slots only, no executor or transport: the caller injects its own (tests).
  bool slots_only = false;
  // This host's GPUs as the run's config asks for them (the supervisor's GPU planning).
  std::function<StatusOr<std::vector<WorkerPlacement>>()> plan_local_slots;
};

struct ExecutorSetup {
  std::unique_ptr<Executor> executor;    // null when slots_only
  std::unique_ptr<Transport> transport;  // null when slots_only
  std::vector<WorkerPlacement> placements;
};

StatusOr<ExecutorSetup> SetUpExecutor(const ExecutorContext& ctx);

}  // namespace ens
