// SubmitPolicy: what one submitter may ask of `ensembled serve` (ServeConfig::limits,
// docs/security.md "Policy"): a priority within the bounds of its kind (administrators: root and
// the members of limits.admins_group; everyone else: submitters), and per-uid quotas over its
// queued and running runs (runs, GPUs, CPU worker slots). A refusal names the limit by its
// pointer in the serve config ("/limits/max_priority: ..."). Pure functions; thread-safe.
#pragma once

#include <sys/types.h>

#include <string>

#include "orchestrator/serve/run_queue.h"
#include "orchestrator/serve/serve_config.h"

namespace ens {

// What a uid holds now: its runs that are queued or running (or stopping, preempting).
struct SubmitterUsage {
  int runs = 0;
  int gpus = 0;
  int cpu_workers = 0;
};

// The GPUs an ask names or counts.
int GpusOf(const RunAsk& ask);

// "" when `priority` is allowed to this submitter, else why not.
std::string RefusePriority(long long priority, bool admin, const SubmitterLimits& limits);

// "" when `uid`, holding `now`, may add a run that asks `ask`, else why not.
std::string RefuseQuota(uid_t uid, const SubmitterUsage& now, const RunAsk& ask, const SubmitterLimits& limits);

}  // namespace ens
