// Process exit codes of every ensembled binary, in one place.
//
// kPermanentFailure means "do not restart": the unit file lists it in
// RestartPreventExitStatus=, so systemd does not loop on a bad config or bad data.
#pragma once

#include "common/base/status.h"

namespace ens::exit_code {

inline constexpr int kOk = 0;
// Something failed that a restart may fix (I/O error, lost worker budget, internal error).
inline constexpr int kTransientFailure = 1;
// Command-line usage error.
inline constexpr int kUsage = 64;
// Bad config, bad data, a member that cannot be built: restarting cannot help.
inline constexpr int kPermanentFailure = 78;
// `ensemblectl verify` found a checkpoint that differs.
inline constexpr int kVerifyMismatch = 3;
// The worker was told to exit for recycling after reporting (clean, respawn expected).
inline constexpr int kWorkerRecycle = 0;
// A worker whose CUDA context became unusable (illegal address, device-side assert, ...): it
// exits without reporting its task, which the supervisor retries as after a crash (EX_TEMPFAIL).
inline constexpr int kDeviceLost = 75;

}  // namespace ens::exit_code

namespace ens {

// The one place a failure becomes an exit code. Transient (1: systemd restarts, a restart may
// succeed): I/O errors, timeouts (a mutation command that ran out of time), internal errors and
// cancellations. Permanent (78: not restarted): bad config or data (InvalidArgument), a file or
// key that is not there (NotFound), state that does not check out (Corruption).
inline int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case Status::Code::kOk: return exit_code::kOk;
    case Status::Code::kIOError:
    case Status::Code::kTimeout:
    case Status::Code::kInternal:
    case Status::Code::kCancelled: return exit_code::kTransientFailure;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound:
    case Status::Code::kCorruption: return exit_code::kPermanentFailure;
  }
  return exit_code::kTransientFailure;
}

}  // namespace ens
