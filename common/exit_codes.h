// Process exit codes of every ensembled binary, in one place.
//
// kPermanentFailure means "do not restart": the unit file lists it in
// RestartPreventExitStatus=, so systemd does not loop on a bad config or bad data.
#pragma once

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

}  // namespace ens::exit_code
