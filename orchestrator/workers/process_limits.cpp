#include "orchestrator/workers/process_limits.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <string>

namespace ens {

namespace {

// Raises the soft limit of `resource` to `need` when it is lower; InvalidArgument when the
// hard limit is lower than need. `what`, `unit`, `ulimit_flag` and `unit_key` only word the error.
Status Fit(int resource, long need, const char* what, const char* unit, const char* ulimit_flag,
           const char* unit_key, int workers) {
  struct rlimit r {};
  if (::getrlimit(resource, &r) != 0) return Status::FromErrno(std::string("getrlimit ") + what, errno);
  const auto want = static_cast<rlim_t>(need);
  if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want)
    return Status::InvalidArgument(
        std::string(what) + " is too small for " + std::to_string(workers) + " workers: they need " +
        std::to_string(need) + " " + unit + ", the hard limit is " + std::to_string(r.rlim_max) +
        ". Raise it (`ulimit -H" + ulimit_flag + " " + std::to_string(need) + "` as root, or " + unit_key + "=" +
        std::to_string(need) + " in the systemd unit) or configure fewer workers");
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < want) {
    r.rlim_cur = want;
    if (::setrlimit(resource, &r) != 0) return Status::FromErrno(std::string("setrlimit ") + what, errno);
  }
  return Status::Ok();
}

}  // namespace

Status FitProcessLimits(int workers, int threads_per_worker) {
  Status s = Fit(RLIMIT_NOFILE, kSupervisorBaseDescriptors + kDescriptorsPerWorker * workers, "the descriptor limit (RLIMIT_NOFILE)",
                 "descriptors", "n", "LimitNOFILE", workers);
  if (!s.ok()) return s;
  // The supervisor's and the workers' threads; what else the user runs is not known here.
  // The kernel does not hold root to RLIMIT_NPROC: nothing to fit then.
  if (::getuid() == 0) return Status::Ok();
  const long threads = kSupervisorThreads + workers * (threads_per_worker + kWorkerExtraThreads);
  return Fit(RLIMIT_NPROC, threads, "the process limit of this user (RLIMIT_NPROC, which counts threads)",
             "threads", "u", "LimitNPROC", workers);
}

}  // namespace ens
