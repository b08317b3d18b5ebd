#include "orchestrator/workers/executor_factory.h"

namespace ens {

// Each kind's setup, defined in its own file (orchestrator/<kind>_executor.cpp).
StatusOr<ExecutorSetup> SetUpLocalExecutor(const ExecutorContext& ctx);
StatusOr<ExecutorSetup> SetUpSlurmExecutor(const ExecutorContext& ctx);

StatusOr<ExecutorSetup> SetUpExecutor(const ExecutorContext& ctx) {
  const ExecutorKind kind = ctx.config->resources.executor;
  switch (kind) {
    case ExecutorKind::kLocal: return SetUpLocalExecutor(ctx);
    case ExecutorKind::kSlurm: return SetUpSlurmExecutor(ctx);
  }
  return Status::InvalidArgument("/resources/executor: kind " + std::to_string(static_cast<int>(kind)) +
                                 " has no setup");
}

}  // namespace ens
