// A scratch file for the loader targets, which read their input from a path.
//
// One path per process and role ("/tmp/ens-fuzz-<pid><suffix>"), rewritten for every input
// and removed at normal exit; a crashed run leaves it behind for inspection. Not thread-safe
// (libFuzzer calls a target from one thread).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ens::fuzz {

class ScratchFile {
 public:
  explicit ScratchFile(const char* suffix)
      : path_("/tmp/ens-fuzz-" + std::to_string(::getpid()) + suffix) {}
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  // Replaces the file's contents with [data, data + size). Overwrites in place and then
  // sets the length, never truncating to zero first: on ext4 a truncate-then-rewrite forces
  // a flush at close (auto_da_alloc), which made every input ~300x slower. Traps when /tmp
  // is unusable: a target that silently tests nothing would report clean runs.
  const std::string& Write(const uint8_t* data, size_t size) {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) __builtin_trap();
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) __builtin_trap();
      done += static_cast<size_t>(n);
    }
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) __builtin_trap();
    if (::close(fd) != 0) __builtin_trap();
    return path_;
  }

 private:
  std::string path_;
};

}  // namespace ens::fuzz
