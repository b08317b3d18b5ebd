// Capabilities of this process (Linux capabilities(7)), read and dropped; the one place that
// speaks capget/capset.
//
// Users: `ensembled serve` with run_as "submitter" checks at start that it holds what it needs
// to start runs as their submitters (orchestrator/serve/run_as.h), and drops everything at start
// when it does not (run_as "daemon"); Subprocess drops them in a child between fork and exec
// (SubprocessSpec::drop_capabilities), so nothing it starts inherits them.
// Stateless; thread-safe (each call is one or two syscalls).
#pragma once

#include <string>
#include <vector>

#include "common/base/status.h"

namespace ens {

// True when `cap` (CAP_SETUID, ...) is in this process's effective set.
bool HasEffectiveCapability(int cap);

// The names ("CAP_SETUID", ...) of those of `caps` that are not in the effective set.
std::vector<std::string> MissingCapabilities(const std::vector<int>& caps);

// Empties the ambient, inheritable, permitted and effective sets of the calling thread.
// Async-signal-safe (raw syscalls only): usable between fork and exec. Returns 0 or an errno.
// The ambient set of a kernel without it (before 4.3) is ignored.
int DropAllCapabilitiesRaw();

// Hardens the calling thread before it execs a program of another user's: empties its
// capability bounding set when it holds CAP_SETPCAP (without it the set stays as the unit left
// it; nothing can use it: see below), then sets no_new_privs (setuid and setgid bits and file
// capabilities do nothing in what it execs, nor in what that starts). With the sets
// DropAllCapabilitiesRaw empties, a non-root uid then never holds a capability again.
// Async-signal-safe. Returns 0 or an errno. *bounding_dropped: whether the bounding set was
// emptied.
int HardenChildRaw(bool* bounding_dropped = nullptr);

// DropAllCapabilitiesRaw as a Status (for the daemon's own process).
Status DropAllCapabilities();

}  // namespace ens
