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
// ENSEMBLED_TEST_SIGKILL_ABOVE=<n> makes a worker given a pack of more than n members SIGKILL
// itself when the pack starts, as the kernel's out-of-memory killer would on a CPU machine
// that fits only n. ENSEMBLED_TEST_SLOW_PHASE=<phase>:<ms> makes every step of that task phase (one member's
// setup, predictions or output) take ms longer: a phase that is long but moving, as a pack
// of thousands is. ENSEMBLED_TEST_HANG=<task_id>:<attempt>[:<phase>] makes that attempt stop
// for good (no progress, no heartbeats) when the task starts, or at that phase.
// ENSEMBLED_TEST_SEND_RAW=<task_id>:<file> makes the worker given that task (first attempt)
// send, before training it, each string of the JSON array in <file> to its supervisor as one
// raw message, "@SLOT@" and "@PID@" replaced by its slot and pid: a worker gone bad (the
// hostile-messages test).
#pragma once

#include <cstddef>

#include <string>
#include <string_view>
#include <vector>

namespace ens {

void CrashPoint(const char* point);
bool NonFiniteLossRequested(const std::string& task_id);
bool WriteFailureRequested(const std::string& task_id, int attempt);
bool OutOfMemoryRequested(size_t pack_size);
// SIGKILLs this process when ENSEMBLED_TEST_SIGKILL_ABOVE is below pack_size.
void KillIfTooBig(size_t pack_size);
bool TorchErrorRequested(const std::string& task_id);
// Sleeps the ENSEMBLED_TEST_SLOW_PHASE delay when `phase` is the one named; else returns at once.
void SlowPhaseIfTold(std::string_view phase);
// Never returns when ENSEMBLED_TEST_HANG names this attempt and phase ("" = the task's start).
void HangIfTold(const std::string& task_id, int attempt, std::string_view phase);
// The raw messages ENSEMBLED_TEST_SEND_RAW asks this attempt to send (empty: none).
std::vector<std::string> RawMessagesRequested(const std::string& task_id, int attempt, int slot, long pid);

}  // namespace ens
