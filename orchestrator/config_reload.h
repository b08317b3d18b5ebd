// Config reload: which changes a running daemon may take at the next round boundary.
//
// Safe (take effect at the next round boundary): rounds.count, rounds.stop_below_error,
// mutation.k, mutation.timeout_s, heartbeat_timeout_s, max_task_attempts, min_members,
// stop_timeout_s, recycle.* (for workers started after the reload).
// Everything else (members, data, resources, seeds, state_dir, mutation policy/argv,
// save_checkpoints, pack_size, service) would change results or the process layout: refused, each
// reported by its JSON pointer. Pure functions. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace ens {

// JSON pointers of the differences that a reload may not apply; empty when all are safe.
std::vector<std::string> UnsafeChanges(const Config& running, const Config& proposed);
// Copies the safe fields of `proposed` into `running`.
void ApplySafeChanges(const Config& proposed, Config* running);

}  // namespace ens
