// FakeDisk: an Env (common/base/env.h) over the real one, for the in-process disk-full and
// torn-write tests (no root, no mount). Installed with ScopedEnv, it forwards every call to
// Env::Default() and adds two faults:
//  - a full disk: SetFreeBytes(n) lets the writes store n more bytes in all; the write that
//    crosses the budget stores what fits and returns the short count, the next fails with
//    ENOSPC (as Linux does when a file system fills), and so does mkdir. SetUnlimited() frees it.
//  - a process that dies: DieAtCall(i) makes the i-th mutating call from now (0: the next one)
//    the last thing the process does: a write stores the first half of its bytes, any other
//    call does nothing; that call and every mutating call after it fail with EIO and change
//    nothing, so what is on disk is what a SIGKILL at that instant would leave (a process
//    death, not a power loss: written bytes stay visible without their fsync).
// Mutating calls: Open with O_CREAT or O_TRUNC, Write, Pwrite, Fsync, Fdatasync, Syncfs,
// Ftruncate, Rename, Exchange, Unlink, Remove, Mkdir. Reads and Close always go through.
// Not thread-safe: one test thread.
#pragma once

#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "common/base/env.h"

namespace ens::testing {

class FakeDisk final : public EnvWrapper {
 public:
  FakeDisk() : EnvWrapper(Env::Default()) {}

  void SetFreeBytes(int64_t n) { free_ = n; }
  void SetUnlimited() { free_ = -1; }
  void DieAtCall(int i) { die_at_ = calls_ + i; }
  bool dead() const { return dead_; }
  // Mutating calls so far (the dying one included).
  int mutating_calls() const { return calls_; }

  int Open(const std::string& path, int flags, int mode) override {
    if ((flags & (O_CREAT | O_TRUNC)) != 0 && !Proceed()) return -1;
    return target()->Open(path, flags, mode);
  }
  ssize_t Write(int fd, const void* data, size_t n) override {
    return Store(n, [&](size_t take) { return target()->Write(fd, data, take); });
  }
  ssize_t Pwrite(int fd, const void* data, size_t n, uint64_t offset) override {
    return Store(n, [&](size_t take) { return target()->Pwrite(fd, data, take, offset); });
  }
  int Fsync(int fd) override { return Proceed() ? target()->Fsync(fd) : -1; }
  int Fdatasync(int fd) override { return Proceed() ? target()->Fdatasync(fd) : -1; }
  int Syncfs(int fd) override { return Proceed() ? target()->Syncfs(fd) : -1; }
  int Ftruncate(int fd, uint64_t size) override { return Proceed() ? target()->Ftruncate(fd, size) : -1; }
  int Rename(const std::string& from, const std::string& to) override {
    return Proceed() ? target()->Rename(from, to) : -1;
  }
  int Exchange(const std::string& a, const std::string& b) override { return Proceed() ? target()->Exchange(a, b) : -1; }
  int Unlink(const std::string& path) override { return Proceed() ? target()->Unlink(path) : -1; }
  int Remove(const std::string& path) override { return Proceed() ? target()->Remove(path) : -1; }
  int Mkdir(const std::string& path, int mode) override {
    if (!Proceed()) return -1;
    if (free_ == 0) return Fail(ENOSPC);
    return target()->Mkdir(path, mode);
  }

 private:
  static int Fail(int err) {
    errno = err;
    return -1;
  }
  // Counts a mutating call; false (errno EIO) when the process is dead or dies at this call.
  bool Proceed() {
    if (!dead_ && calls_++ != die_at_) return true;
    dead_ = true;
    errno = EIO;
    return false;
  }
  // A write of n bytes through `write(take)`: the dying one stores half, the budget caps it.
  template <typename WriteFn>
  ssize_t Store(size_t n, WriteFn write) {
    const bool dies = !dead_ && calls_ == die_at_;
    if (!Proceed()) {
      if (dies && n / 2 > 0) write(n / 2);
      return Fail(EIO);
    }
    if (free_ == 0 && n > 0) return Fail(ENOSPC);
    const size_t take = free_ < 0 ? n : std::min<size_t>(n, static_cast<size_t>(free_));
    const ssize_t w = write(take);
    if (w > 0 && free_ > 0) free_ -= w;
    return w;
  }

  int64_t free_ = -1;  // bytes the disk still takes; -1: unlimited
  int calls_ = 0;
  int die_at_ = -1;
  bool dead_ = false;
};

}  // namespace ens::testing
