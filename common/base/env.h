// Env: the product's one seam to the outside world, as leveldb's Env is for its database: the
// file-system calls that durability depends on, the clock, and the faults a test injects
// (fault_injection.h). Product code that writes the run state (atomic_file.h, fd_io.h, the
// journal, the member directories, the dataset segments) and reads the time asks
// CurrentEnv(), never the OS directly, so a test can wrap the OS in process: a disk that fills
// after a byte budget, a write that stores only part of its bytes and then a process that
// "dies", a clock that it moves.
//
// The file calls keep POSIX's shape on purpose: descriptors, -1 (or a short count) with errno
// set. The call sites already turn errno into a Status naming the path (Status::FromErrno),
// once each; the seam changes who answers, not how the answer reads.
//
// Env::Default() is the real OS, the real clocks and the environment's faults (the variables of
// env_vars.h, so a child process of a crash or kill-storm test still gets its faults). A test
// installs its own Env with ScopedEnv, usually an EnvWrapper that overrides a few calls and
// forwards the rest. Installing is not thread-safe (install before the threads start, as tests
// do); asking CurrentEnv() is, from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ens {

class Faults;  // fault_injection.h

class Env {
 public:
  virtual ~Env() = default;

  // The real OS, the real clocks and the environment's faults. Lives for the process.
  static Env* Default();

  // ---- files: each as the POSIX call of the same name; -1 (short count) and errno on failure ----
  // O_CLOEXEC is the caller's to pass.
  virtual int Open(const std::string& path, int flags, int mode) = 0;
  virtual ssize_t Read(int fd, void* data, size_t n) = 0;
  virtual ssize_t Write(int fd, const void* data, size_t n) = 0;
  virtual ssize_t Pwrite(int fd, const void* data, size_t n, uint64_t offset) = 0;
  virtual int Fsync(int fd) = 0;
  virtual int Fdatasync(int fd) = 0;
  virtual int Syncfs(int fd) = 0;
  virtual int Ftruncate(int fd, uint64_t size) = 0;
  virtual int Close(int fd) = 0;
  virtual int Rename(const std::string& from, const std::string& to) = 0;
  // renameat2(RENAME_EXCHANGE): swaps two existing paths atomically.
  virtual int Exchange(const std::string& a, const std::string& b) = 0;
  virtual int Unlink(const std::string& path) = 0;
  // remove(3): a file, or an empty directory.
  virtual int Remove(const std::string& path) = 0;
  virtual int Mkdir(const std::string& path, int mode) = 0;

  // ---- clocks ----
  virtual std::chrono::system_clock::time_point WallNow() = 0;    // timestamps written down
  virtual std::chrono::steady_clock::time_point SteadyNow() = 0;  // durations, deadlines, heartbeats

  // ---- faults: what a test makes fail (fault_injection.h asks here) ----
  virtual Faults& faults() = 0;
};

// Forwards every call to `target` (not owned; it must outlive the wrapper). A test's Env
// derives from it and overrides what it fakes.
class EnvWrapper : public Env {
 public:
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  int Open(const std::string& path, int flags, int mode) override { return target_->Open(path, flags, mode); }
  ssize_t Read(int fd, void* data, size_t n) override { return target_->Read(fd, data, n); }
  ssize_t Write(int fd, const void* data, size_t n) override { return target_->Write(fd, data, n); }
  ssize_t Pwrite(int fd, const void* data, size_t n, uint64_t offset) override {
    return target_->Pwrite(fd, data, n, offset);
  }
  int Fsync(int fd) override { return target_->Fsync(fd); }
  int Fdatasync(int fd) override { return target_->Fdatasync(fd); }
  int Syncfs(int fd) override { return target_->Syncfs(fd); }
  int Ftruncate(int fd, uint64_t size) override { return target_->Ftruncate(fd, size); }
  int Close(int fd) override { return target_->Close(fd); }
  int Rename(const std::string& from, const std::string& to) override { return target_->Rename(from, to); }
  int Exchange(const std::string& a, const std::string& b) override { return target_->Exchange(a, b); }
  int Unlink(const std::string& path) override { return target_->Unlink(path); }
  int Remove(const std::string& path) override { return target_->Remove(path); }
  int Mkdir(const std::string& path, int mode) override { return target_->Mkdir(path, mode); }
  std::chrono::system_clock::time_point WallNow() override { return target_->WallNow(); }
  std::chrono::steady_clock::time_point SteadyNow() override { return target_->SteadyNow(); }
  Faults& faults() override { return target_->faults(); }

 private:
  Env* target_;
};

// The Env product code asks: the innermost ScopedEnv's, else Env::Default().
Env& CurrentEnv();

// Installs `env` (not owned) for the process while it lives, then restores the one before.
// Tests only. REQUIRES: scopes nest (destroyed in the reverse order of their making).
class ScopedEnv {
 public:
  explicit ScopedEnv(Env* env);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  Env* before_;
};

// Unix seconds of CurrentEnv()'s wall clock: the "time" of journal records.
int64_t WallSeconds();

}  // namespace ens
