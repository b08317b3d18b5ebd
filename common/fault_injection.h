// Fault injection for the crash tests: lets a test kill a process at a named point.
//
// ENSEMBLED_CRASH_AT=<point>[:<n>] makes the n-th (default first) call of CrashPoint(point)
// SIGKILL the calling process, exactly as an OOM kill or power loss would at that instant.
// Unset (always, in production), CrashPoint is one getenv per call. Not thread-safe.
#pragma once

namespace ens {

void CrashPoint(const char* point);

}  // namespace ens
