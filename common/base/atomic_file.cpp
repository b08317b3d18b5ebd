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

// Opens `path` with `flags`, runs `sync` (fsync, syncfs) on it and closes it; errors name both.
Status SyncPath(const std::string& path, int flags, int (*sync)(int), const char* what) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno("open " + path, errno);
  int rc = sync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::FromErrno(std::string(what) + " " + path, err);
  return Status::Ok();
}

}  // namespace

Status FsyncDir(const std::string& dir) { return SyncPath(dir, O_RDONLY | O_DIRECTORY, ::fsync, "fsync"); }

namespace {

// Writes all of content to a new file at `path` and, with sync, fsyncs it; removes it on failure.
Status WriteAndSync(const std::string& path, const std::string& content, int mode, bool sync = true) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::FromErrno("create " + path, errno);
  if (Status s = WriteFull(fd, content.data(), content.size(), path); !s.ok()) {
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  if (sync && ::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return Status::FromErrno("fsync " + path, err);
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(path.c_str());
    return Status::FromErrno("close " + path, err);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileUnsynced(const std::string& path, const std::string& content, int mode) {
  return WriteAndSync(path, content, mode, /*sync=*/false);
}

Status SyncFileSystem(const std::string& path) { return SyncPath(path, O_RDONLY, ::syncfs, "syncfs"); }

Status WriteFileDurable(const std::string& path, const std::string& content, int mode) {
  return WriteAndSync(path, content, mode);
}

namespace {

// <path>.tmp, then a rename over <path>; with durable, the file and then its directory fsynced.
Status WriteAndRename(const std::string& path, const std::string& content, int mode, bool durable) {
  std::string tmp = path + ".tmp";
  Status s = WriteAndSync(tmp, content, mode, durable);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
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
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return Status::FromErrno(path, errno);
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return Status::FromErrno(path, err);
  return out;
}

Status MakeDirs(const std::string& path, int mode) {
  if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST) {
    if (errno != ENOENT) return Status::FromErrno("mkdir " + path, errno);
    // A missing parent: make it, then this one. The parent is a strictly shorter string, so
    // this ends at "/" or the first component at the latest.
    size_t end = path.find_last_not_of('/');
    end = end == std::string::npos ? std::string::npos : path.find_last_of('/', end);
    if (end == std::string::npos || end == 0) return Status::FromErrno("mkdir " + path, ENOENT);
    if (Status s = MakeDirs(path.substr(0, end), mode); !s.ok()) return s;
    if (::mkdir(path.c_str(), static_cast<mode_t>(mode)) != 0 && errno != EEXIST)
      return Status::FromErrno("mkdir " + path, errno);
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::IOError(path + ": not a directory");
  return Status::Ok();
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

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
    if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) != 0)
      return Status::FromErrno("exchange " + from + " with " + to, errno);
    return RemoveTree(from);
  }
  if (::rename(from.c_str(), to.c_str()) != 0) return Status::FromErrno("rename " + from + " to " + to, errno);
  return Status::Ok();
}

Status RenameDirAtomic(const std::string& from, const std::string& to) {
  Status s = SwapDirInto(from, to);
  return s.ok() ? FsyncDir(ParentDir(to)) : s;
}

}  // namespace ens
