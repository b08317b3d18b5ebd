// Fault injection: the one module through which tests make product code fail on purpose.
//
// Product code asks through the free functions below; each asks the process's Faults (a narrow
// interface, as leveldb's Env is for its file system). By default that is the environment's:
// each fault is set by a variable, so a test can set it for a child process (the crash and
// kill-storm tests run the real binaries). A test in the same process may install its own
// Faults (ScopedFaults). Unset, every question is one getenv: nothing fails.
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
// ENSEMBLED_TEST_FAIL_JOURNAL=<event> makes every journal write holding a record of that event
// fail with an I/O error, as a full or failing disk would (nothing of the write is kept).
// ENSEMBLED_TEST_CUDA_SEES replaces what CUDA reports to a GPU worker (cuda_support.h).
#pragma once

#include <cstddef>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// The environment's faults (the variables above).
Faults& EnvironmentFaults();

// Installs `faults` for the process while it lives, then restores the one before. Tests only.
class ScopedFaults {
 public:
  explicit ScopedFaults(Faults* faults);
  ~ScopedFaults();
  ScopedFaults(const ScopedFaults&) = delete;
  ScopedFaults& operator=(const ScopedFaults&) = delete;

 private:
  Faults* before_;
};

// ---- what product code calls ----
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
// Whether a journal write holding a record of `event` must fail.
bool JournalWriteFailureRequested(const std::string& event);
// ENSEMBLED_TEST_CUDA_SEES: "none", "given" or a UUID; nullopt when unset.
std::optional<std::string> CudaSeesRequested();

}  // namespace ens
