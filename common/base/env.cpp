#include "common/base/env.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>

#include "common/base/fault_injection.h"

namespace ens {
namespace {

class PosixEnv final : public Env {
 public:
  int Open(const std::string& path, int flags, int mode) override {
    return ::open(path.c_str(), flags, static_cast<mode_t>(mode));
  }
  ssize_t Read(int fd, void* data, size_t n) override { return ::read(fd, data, n); }
  ssize_t Write(int fd, const void* data, size_t n) override { return ::write(fd, data, n); }
  ssize_t Pwrite(int fd, const void* data, size_t n, uint64_t offset) override {
    return ::pwrite(fd, data, n, static_cast<off_t>(offset));
  }
  int Fsync(int fd) override { return ::fsync(fd); }
  int Fdatasync(int fd) override { return ::fdatasync(fd); }
  int Syncfs(int fd) override { return ::syncfs(fd); }
  int Ftruncate(int fd, uint64_t size) override { return ::ftruncate(fd, static_cast<off_t>(size)); }
  int Close(int fd) override { return ::close(fd); }
  int Rename(const std::string& from, const std::string& to) override { return ::rename(from.c_str(), to.c_str()); }
  int Exchange(const std::string& a, const std::string& b) override {
    return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
  }
  int Unlink(const std::string& path) override { return ::unlink(path.c_str()); }
  int Remove(const std::string& path) override { return ::remove(path.c_str()); }
  int Mkdir(const std::string& path, int mode) override { return ::mkdir(path.c_str(), static_cast<mode_t>(mode)); }
  std::chrono::system_clock::time_point WallNow() override { return std::chrono::system_clock::now(); }
  std::chrono::steady_clock::time_point SteadyNow() override { return std::chrono::steady_clock::now(); }
  Faults& faults() override { return EnvironmentFaults(); }
};

std::atomic<Env*> installed{nullptr};  // a test's; null: the default

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv();  // never destroyed: static destructors may still close files
  return env;
}

Env& CurrentEnv() {
  Env* env = installed.load(std::memory_order_acquire);
  return env != nullptr ? *env : *Env::Default();
}

ScopedEnv::ScopedEnv(Env* env) : before_(installed.load(std::memory_order_acquire)) {
  installed.store(env, std::memory_order_release);
}

ScopedEnv::~ScopedEnv() { installed.store(before_, std::memory_order_release); }

int64_t WallSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(CurrentEnv().WallNow().time_since_epoch()).count();
}

}  // namespace ens
