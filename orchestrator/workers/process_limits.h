// Process limits a run of N workers needs, fitted before any worker starts.
//
// What grows with the worker count, per worker:
//   - two descriptors in the supervisor (its end of the worker's WorkerChannel, and the pidfd
//     through which common/subprocess watches a local worker), counted against the
//     supervisor's RLIMIT_NOFILE (per process);
//   - its threads (threads_per_worker compute threads plus a few of libtorch's and ours), counted
//     against the user's RLIMIT_NPROC, which on Linux counts threads, across everything the user
//     runs (not for root, whom the kernel does not hold to it).
// Nothing is taken from RLIMIT_MSGQUEUE (no POSIX queues) or from /dev/shm (the dataset is a
// file in the state directory).
// FitProcessLimits raises a soft limit that is too low up to what is needed (never above the
// hard limit, never lowering anything). A need above a hard limit cannot be met by a restart:
// the error names the limit, the need and the fix, and is InvalidArgument (exit 78). Processes
// the user runs elsewhere are not counted: running out of them later is a failed spawn, retried.
#pragma once

#include "common/base/status.h"

namespace ens {

// Descriptors the supervisor holds whatever the worker count: journal, logs, control and
// HTTP sockets, signalfd, epoll, and the files a round opens.
inline constexpr long kSupervisorBaseDescriptors = 128;
inline constexpr long kDescriptorsPerWorker = 2;

// Threads of a worker beyond its compute threads, and of the supervisor.
inline constexpr long kWorkerExtraThreads = 4;
inline constexpr long kSupervisorThreads = 8;

// REQUIRES: workers >= 0, threads_per_worker >= 1.
Status FitProcessLimits(int workers, int threads_per_worker);

}  // namespace ens
