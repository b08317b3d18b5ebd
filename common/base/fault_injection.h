// Fault injection: the one module through which tests make product code fail on purpose.
//
// Product code asks through the free functions below; each asks CurrentEnv().faults() (env.h:
// the seam to the outside world holds the faults beside the file system and the clock, so one
// Env a test installs wraps both). Env::Default()'s faults are the environment's: each fault is
// set by an ENSEMBLED_TEST_* variable (or ENSEMBLED_CRASH_AT), listed with what it does in
// env_vars.h, so a test can set it for a child process (the crash and kill-storm tests run the
// real binaries). A test in the same process may install its own Faults (ScopedFaults, or an
// Env whose faults() answers). Unset, every question is one getenv: nothing fails.
//
// CrashPoint(point) SIGKILLs the calling process, exactly as an OOM kill or power loss would at
// that instant, on the n-th call that ENSEMBLED_CRASH_AT=<point>[:<n>] names. Unset (always, in
// production), CrashPoint is one getenv per call. Not thread-safe.
#pragma once

#include <cstddef>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/env.h"

namespace ens {

// What a test can make fail. Each method answers for one call of the product code named beside it.
class Faults {
 public:
  virtual ~Faults() = default;
  // The n-th call of CrashPoint(point) this process makes: kill it now?
  virtual bool CrashAt(const char* point, int nth) = 0;
  virtual bool NonFiniteLoss(const std::string& task_id) = 0;
  virtual bool WriteFailure(const std::string& task_id, int attempt) = 0;
  virtual bool OutOfMemory(size_t pack_size) = 0;
  virtual bool KillForSize(size_t pack_size) = 0;
  virtual bool TorchError(const std::string& task_id) = 0;
  virtual int SlowPhaseMs(std::string_view phase) = 0;  // 0: not slowed
  virtual bool Hang(const std::string& task_id, int attempt, std::string_view phase) = 0;
  virtual std::vector<std::string> RawMessages(const std::string& task_id, int attempt, int slot, long pid) = 0;
  virtual bool JournalWriteFails(const std::string& event) = 0;
  // What CUDA should be taken to see (cuda_support.h); nullopt: ask CUDA.
  virtual std::optional<std::string> CudaSees() = 0;
};

// The environment's faults (the ENSEMBLED_TEST_* variables and ENSEMBLED_CRASH_AT of env_vars.h):
// Env::Default()'s.
Faults& EnvironmentFaults();

// Installs `faults` for the process while it lives (an Env that forwards everything to the
// current one but answers the fault questions with `faults`), then restores the Env before.
// Tests only; nests with ScopedEnv as scopes do.
class ScopedFaults {
 public:
  explicit ScopedFaults(Faults* faults);
  ScopedFaults(const ScopedFaults&) = delete;
  ScopedFaults& operator=(const ScopedFaults&) = delete;

 private:
  class FaultsEnv final : public EnvWrapper {
   public:
    FaultsEnv(Env* target, Faults* faults) : EnvWrapper(target), faults_(faults) {}
    Faults& faults() override { return *faults_; }

   private:
    Faults* faults_;
  };
  FaultsEnv env_;
  ScopedEnv installed_;
};

// ---- what product code calls ----
void CrashPoint(const char* point);
bool NonFiniteLossRequested(const std::string& task_id);
bool WriteFailureRequested(const std::string& task_id, int attempt);
bool OutOfMemoryRequested(size_t pack_size);
// SIGKILLs this process when the faults say pack_size is too big (ENSEMBLED_TEST_SIGKILL_ABOVE).
void KillIfTooBig(size_t pack_size);
bool TorchErrorRequested(const std::string& task_id);
// Sleeps the ENSEMBLED_TEST_SLOW_PHASE delay when `phase` is the one named; else returns at once.
void SlowPhaseIfTold(std::string_view phase);
// Never returns when ENSEMBLED_TEST_HANG names this attempt and phase ("" = the task's start).
void HangIfTold(const std::string& task_id, int attempt, std::string_view phase);
// The raw messages ENSEMBLED_TEST_SEND_RAW asks this attempt to send (empty: none).
std::vector<std::string> RawMessagesRequested(const std::string& task_id, int attempt, int slot, long pid);
// Whether a journal write holding a record of `event` must fail.
bool JournalWriteFailureRequested(const std::string& event);
// ENSEMBLED_TEST_CUDA_SEES: "none", "given" or a UUID; nullopt when unset.
std::optional<std::string> CudaSeesRequested();

}  // namespace ens
