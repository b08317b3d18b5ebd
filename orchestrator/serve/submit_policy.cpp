#include "orchestrator/serve/submit_policy.h"

namespace ens {

int GpusOf(const RunAsk& ask) { return ask.gpu_count > 0 ? ask.gpu_count : static_cast<int>(ask.gpus.size()); }

std::string RefusePriority(long long priority, bool admin, const SubmitterLimits& limits) {
  const int high = admin ? limits.admin_max_priority : limits.max_priority;
  if (priority < limits.min_priority)
    return "/limits/min_priority: priority " + std::to_string(priority) + " is below the lowest allowed, " +
           std::to_string(limits.min_priority);
  if (priority > high)
    return std::string(admin ? "/limits/admin_max_priority" : "/limits/max_priority") + ": priority " +
           std::to_string(priority) + " is above the highest " + (admin ? "an administrator" : "a submitter") +
           " may ask, " + std::to_string(high) +
           (admin ? "" : " (administrators: root and the members of limits.admins_group)");
  return "";
}

std::string RefuseQuota(uid_t uid, const SubmitterUsage& now, const RunAsk& ask, const SubmitterLimits& limits) {
  const std::string who = "uid " + std::to_string(uid);
  if (limits.runs > 0 && now.runs + 1 > limits.runs)
    return "/limits/runs: " + who + " has " + std::to_string(now.runs) + " runs queued or running; the limit is " +
           std::to_string(limits.runs);
  if (limits.gpus > 0 && now.gpus + GpusOf(ask) > limits.gpus)
    return "/limits/gpus: " + who + "'s runs ask " + std::to_string(now.gpus) + " GPUs and this one " +
           std::to_string(GpusOf(ask)) + "; the limit is " + std::to_string(limits.gpus);
  if (limits.cpu_workers > 0 && now.cpu_workers + ask.cpu_workers > limits.cpu_workers)
    return "/limits/cpu_workers: " + who + "'s runs ask " + std::to_string(now.cpu_workers) + " CPU workers and this one " +
           std::to_string(ask.cpu_workers) + "; the limit is " + std::to_string(limits.cpu_workers);
  return "";
}

}  // namespace ens
