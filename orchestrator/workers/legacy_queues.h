// Message queues left behind by ensembled versions before December 2026.
//
// Those versions gave every run POSIX message queues named /ens-<uid>-<run id>-up and
// -s<slot>. The queues of a SIGKILLed run stayed in the kernel, holding the user's
// RLIMIT_MSGQUEUE budget, until that run resumed; if it never did, they stayed until reboot.
// This version makes no queues (workers talk over socket pairs, common/ipc/worker_channel.h) and,
// at start, removes such queues once nothing can be using them:
//   - named ens-<this uid>-..., owned by this user;
//   - open in no process this user can see (a live run of an earlier version holds each of its
//     queues open for its whole life; a worker of it, its own);
//   - untouched for at least min_age (a run of an earlier version that is creating its queues
//     right now is left alone).
// Queues of other users, and anything not named so, are never touched. Needs the mqueue
// filesystem listed at mqueue_dir (Debian mounts it at /dev/mqueue); without it nothing happens.
// Not thread-safe (it reads /proc while processes come and go, which is fine: a process that
// opens a queue after the scan is one created after min_age had passed, i.e. a resuming run of
// an earlier version, which re-creates its queues anyway).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ens {

struct LegacyQueueSweep {
  std::vector<std::string> removed;  // names, "/ens-..."
  int in_use = 0;                    // left alone: open in a process
  int too_young = 0;                 // left alone: touched less than min_age ago
};

LegacyQueueSweep ReclaimLegacyQueues(const std::string& mqueue_dir = "/dev/mqueue",
                                     std::chrono::seconds min_age = std::chrono::seconds(60));

}  // namespace ens
