// Fault injection for the crash tests: lets a test kill a process at a named point.
//
// ENSEMBLED_CRASH_AT=<point>[:<n>] makes the n-th (default first) call of CrashPoint(point)
// SIGKILL the calling process, exactly as an OOM kill or power loss would at that instant.
// Unset (always, in production), CrashPoint is one getenv per call. Not thread-safe.
//
// ENSEMBLED_TEST_NONFINITE=<task_id>[,<task_id>...] makes those tasks' training loss NaN
// from the first step, as a diverging member's would be (the deterministic-failure tests).
// ENSEMBLED_TEST_FAIL_WRITE=<task_id>:<attempt>[,...] makes that attempt's member-directory
// write fail with an I/O error, as a full or failing disk would (a transient failure).
// ENSEMBLED_TEST_OOM_ABOVE=<n> makes a pack of more than n members throw libtorch's
// out-of-memory error when its training starts (a GPU that fits only n);
// ENSEMBLED_TEST_TORCH_ERROR=<task_id>[,...] throws a plain c10::Error (a shape mismatch)
// for a pack holding one of those tasks. There is no GPU in CI: these stand in.
#pragma once

#include <cstddef>

#include <string>

namespace ens {

void CrashPoint(const char* point);
bool NonFiniteLossRequested(const std::string& task_id);
bool WriteFailureRequested(const std::string& task_id, int attempt);
bool OutOfMemoryRequested(size_t pack_size);
bool TorchErrorRequested(const std::string& task_id);

}  // namespace ens
