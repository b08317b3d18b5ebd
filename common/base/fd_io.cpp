#include "common/base/fd_io.h"

#include <unistd.h>

#include <cerrno>

#include "common/base/env.h"

namespace ens {

Status WriteFull(int fd, const void* data, size_t n, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  Env& env = CurrentEnv();
  while (n > 0) {
    const ssize_t w = env.Write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::FromErrno("write " + what, errno);
    if (w == 0) return Status::IOError("write " + what + ": no progress");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::Ok();
}

Status PwriteFull(int fd, const void* data, size_t n, uint64_t offset, const std::string& what) {
  const char* p = static_cast<const char*>(data);
  Env& env = CurrentEnv();
  while (n > 0) {
    const ssize_t w = env.Pwrite(fd, p, n, offset);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Status::FromErrno("write " + what, errno);
    if (w == 0) return Status::IOError("write " + what + ": no progress");
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

Status PreadFull(int fd, void* data, size_t n, uint64_t offset, const std::string& what) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno("read " + what, errno);
    if (r == 0) return Status::Corruption(what + ": truncated (the file ends before the bytes it should hold)");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

Status ReadFull(int fd, void* data, size_t n, const std::string& what, bool* eof) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  if (eof) *eof = false;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::FromErrno("read " + what, errno);
    if (r == 0) {
      if (got == 0 && eof) {
        *eof = true;
        return Status::Ok();
      }
      return Status::IOError("read " + what + ": input ended inside a record (" + std::to_string(got) + " of " +
                             std::to_string(n) + " bytes)");
    }
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace ens
