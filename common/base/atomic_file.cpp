#include "common/base/atomic_file.h"

#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/base/env.h"
#include "common/base/fd_io.h"

namespace ens {

std::string ParentDir(const std::string& path) {
  auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string BaseName(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

bool PathExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

namespace {

// What SyncPath runs on the descriptor it opens.
enum class SyncCall { kFsync, kSyncfs };

// Opens `path` with `flags`, fsyncs or syncfs-es it and closes it; errors name both.
Status SyncPath(const std::string& path, int flags, SyncCall call) {
  Env& env = CurrentEnv();
  int fd = env.Open(path, flags | O_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  int rc = call == SyncCall::kFsync ? env.Fsync(fd) : env.Syncfs(fd);
  int err = errno;
  env.Close(fd);
  if (rc != 0) return Status::FromErrno(std::string(call == SyncCall::kFsync ? "fsync" : "syncfs") + " " + path, err);
  return Status::Ok();
}

}  // namespace

Status FsyncDir(const std::string& dir) { return SyncPath(dir, O_RDONLY | O_DIRECTORY, SyncCall::kFsync); }

namespace {

// Writes all of content to a new file at `path` and, with sync, fsyncs it; removes it on failure.
Status WriteAndSync(const std::string& path, const std::string& content, int mode, bool sync = true) {
  Env& env = CurrentEnv();
  int fd = env.Open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::FromErrno("create " + path, errno);
  if (Status s = WriteFull(fd, content.data(), content.size(), path); !s.ok()) {
    env.Close(fd);
    env.Unlink(path);
    return s;
  }
  if (sync && env.Fsync(fd) != 0) {
    int err = errno;
    env.Close(fd);
    env.Unlink(path);
    return Status::FromErrno("fsync " + path, err);
  }
  if (env.Close(fd) != 0) {
    int err = errno;
    env.Unlink(path);
    return Status::FromErrno("close " + path, err);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileUnsynced(const std::string& path, const std::string& content, int mode) {
  return WriteAndSync(path, content, mode, /*sync=*/false);
}

Status SyncFileSystem(const std::string& path) { return SyncPath(path, O_RDONLY, SyncCall::kSyncfs); }

Status WriteFileDurable(const std::string& path, const std::string& content, int mode) {
  return WriteAndSync(path, content, mode);
}

namespace {

// <path>.tmp, then a rename over <path>; with durable, the file and then its directory fsynced.
Status WriteAndRename(const std::string& path, const std::string& content, int mode, bool durable) {
  std::string tmp = path + ".tmp";
  Status s = WriteAndSync(tmp, content, mode, durable);
  if (!s.ok()) return s;
  Env& env = CurrentEnv();
  if (env.Rename(tmp, path) != 0) {
    int err = errno;
    env.Unlink(tmp);
    return Status::FromErrno("rename " + tmp + " to " + path, err);
  }
  return durable ? FsyncDir(ParentDir(path)) : Status::Ok();
}

}  // namespace

Status WriteFileAtomic(const std::string& path, const std::string& content, int mode) {
  return WriteAndRename(path, content, mode, /*durable=*/true);
}

Status WriteFileReplace(const std::string& path, const std::string& content, int mode) {
  return WriteAndRename(path, content, mode, /*durable=*/false);
}

StatusOr<std::string> ReadFile(const std::string& path) {
  Env& env = CurrentEnv();
  const int fd = env.Open(path, O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno(path, errno);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = env.Read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      env.Close(fd);
      return Status::FromErrno(path, err);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  env.Close(fd);
  return out;
}

Status MakeDirs(const std::string& path, int mode) {
  Env& env = CurrentEnv();
  if (env.Mkdir(path, mode) != 0 && errno != EEXIST) {
    if (errno != ENOENT) return Status::FromErrno("mkdir " + path, errno);
    // A missing parent: make it, then this one. The parent is a strictly shorter string, so
    // this ends at "/" or the first component at the latest.
    size_t end = path.find_last_not_of('/');
    end = end == std::string::npos ? std::string::npos : path.find_last_of('/', end);
    if (end == std::string::npos || end == 0) return Status::FromErrno("mkdir " + path, ENOENT);
    if (Status s = MakeDirs(path.substr(0, end), mode); !s.ok()) return s;
    if (env.Mkdir(path, mode) != 0 && errno != EEXIST)
      return Status::FromErrno("mkdir " + path, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::IOError(path + ": not a directory");
  return Status::Ok();
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return CurrentEnv().Remove(path); }

}  // namespace

// nftw, not std::filesystem::remove_all: in the worker, libtorch.so exports its own copy of
// the latter, which crashes on non-empty directories.
Status RemoveTree(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();  // absent is fine
  if (::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    return Status::FromErrno("remove " + path, errno);
  return Status::Ok();
}

Status SwapDirInto(const std::string& from, const std::string& to) {
  // An existing target is swapped out atomically (a reader never sees it missing), then removed.
  if (PathExists(to)) {
    if (CurrentEnv().Exchange(from, to) != 0)
      return Status::FromErrno("exchange " + from + " with " + to, errno);
    return RemoveTree(from);
  }
  if (CurrentEnv().Rename(from, to) != 0) return Status::FromErrno("rename " + from + " to " + to, errno);
  return Status::Ok();
}

Status RenameDirAtomic(const std::string& from, const std::string& to) {
  Status s = SwapDirInto(from, to);
  return s.ok() ? FsyncDir(ParentDir(to)) : s;
}

}  // namespace ens
