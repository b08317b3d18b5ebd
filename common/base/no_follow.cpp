#include "common/base/no_follow.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "common/base/fd_io.h"

namespace ens {
namespace {

// Closes a descriptor at the end of a scope unless released.
class Fd {
 public:
  Fd(int fd = -1) : fd_(fd) {}  // NOLINT: a descriptor becomes an Fd
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// Why openat of `name` in `dir` failed with `err`, in words that name `path`.
Status OpenError(int dir, const std::string& name, const std::string& path, int err) {
  if (err == ENOENT) return Status::NotFound(path + ": does not exist");
  if (err == ELOOP || err == ENOTDIR || err == ENXIO) {
    struct stat st {};
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
      return Status::InvalidArgument(path + ": " + (name.empty() ? path : name) +
                                     " is a symbolic link (not followed)");
    if (err == ENOTDIR) return Status::InvalidArgument(path + ": " + name + " is not a directory");
  }
  return Status::FromErrno(path, err);
}

struct Parent {
  Fd dir;
  std::string last;  // "" when the path names a directory ("/", "a/")
};

// The components of `text`, '.' and empty ones left out.
std::deque<std::string> Components(const std::string& text) {
  std::deque<std::string> parts;
  for (size_t at = 0; at <= text.size();) {
    size_t slash = text.find('/', at);
    if (slash == std::string::npos) slash = text.size();
    std::string part = text.substr(at, slash - at);
    if (!part.empty() && part != ".") parts.push_back(part);
    at = slash + 1;
  }
  return parts;
}

// When `name` in `dir` is a symbolic link that root owns (an administrator's: /data -> /srv/data),
// its target; nullopt for anything else. Root is trusted; a link of anyone else is not followed.
std::optional<std::string> RootLinkTarget(int dir, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISLNK(st.st_mode) || st.st_uid != 0 ||
      st.st_nlink != 1)
    return std::nullopt;
  char buf[4096];
  ssize_t n = ::readlinkat(dir, name.c_str(), buf, sizeof(buf));
  if (n <= 0 || n == static_cast<ssize_t>(sizeof(buf))) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

// The directory holding the last component of `path`, reached with O_NOFOLLOW at every step
// (root's own links excepted). A ".." of `path` itself is refused (one inside a root-owned
// link's target is root's word and taken).
StatusOr<Parent> WalkToParent(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("an empty path");
  std::deque<std::string> parts = Components(path);
  for (const std::string& p : parts)
    if (p == "..") return Status::InvalidArgument(path + ": a '..' component (not followed)");
  Fd dir(::open(path[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Status::FromErrno(path, errno);
  const bool names_dir = path.back() == '/' || parts.empty();
  int links = 0;
  while (!parts.empty()) {
    const std::string part = parts.front();
    const bool last = parts.size() == 1 && !names_dir;
    if (std::optional<std::string> target = RootLinkTarget(dir.get(), part)) {
      if (++links > 40) return Status::InvalidArgument(path + ": too many levels of root's links");
      parts.pop_front();
      std::deque<std::string> more = Components(*target);
      parts.insert(parts.begin(), more.begin(), more.end());
      if ((*target)[0] == '/') dir = Fd(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (parts.empty()) break;  // a link to "/"
      continue;
    }
    if (last) return Parent{std::move(dir), part};
    int next = ::openat(dir.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) return OpenError(dir.get(), part, path, errno);
    dir = Fd(next);
    parts.pop_front();
  }
  return Parent{std::move(dir), std::string()};
}

const char* KindOf(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  return "a special file";
}

// What was opened must be of `kind` (S_IFREG, ...), have one link (files and sockets), belong
// to check.owner, and (a file) be at most check.max_bytes.
Status CheckOpened(int fd, const std::string& path, mode_t kind, const FileCheck& check) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Status::FromErrno("stat " + path, errno);
  if (S_ISLNK(st.st_mode) && kind != S_IFLNK) return Status::InvalidArgument(path + ": a symbolic link (not followed)");
  if ((st.st_mode & S_IFMT) != kind) {
    struct stat want {};
    want.st_mode = kind;
    return Status::InvalidArgument(path + ": " + KindOf(st.st_mode) + ", not " + KindOf(want.st_mode));
  }
  if (kind != S_IFDIR && st.st_nlink != 1)
    return Status::InvalidArgument(path + ": has " + std::to_string(st.st_nlink) + " links (a hard link is not read)");
  if (check.owner && st.st_uid != *check.owner)
    return Status::InvalidArgument(path + ": belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                                    std::to_string(*check.owner));
  if (kind == S_IFREG && static_cast<uint64_t>(st.st_size) > check.max_bytes)
    return Status::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes, over the limit of " +
                                   std::to_string(check.max_bytes));
  return Status::Ok();
}

// The last component of `path` opened with `flags` | O_NOFOLLOW and checked to be `kind`.
StatusOr<int> OpenChecked(const std::string& path, int flags, mode_t kind, const FileCheck& check) {
  StatusOr<Parent> parent = WalkToParent(path);
  if (!parent.ok()) return parent.status();
  const char* last = parent->last.empty() ? "." : parent->last.c_str();
  if (parent->last.empty() && kind != S_IFDIR) return Status::InvalidArgument(path + ": names a directory");
  Fd fd(::openat(parent->dir.get(), last, flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return OpenError(parent->dir.get(), parent->last, path, errno);
  if (Status s = CheckOpened(fd.get(), path, kind, check); !s.ok()) return s;
  return fd.release();
}

}  // namespace

StatusOr<int> OpenNoFollow(const std::string& path, const FileCheck& check) {
  return OpenChecked(path, O_RDONLY | O_NONBLOCK, S_IFREG, check);
}

StatusOr<std::string> ReadNoFollow(const std::string& path, const FileCheck& check, uid_t* owner) {
  StatusOr<int> opened = OpenNoFollow(path, check);
  if (!opened.ok()) return opened.status();
  Fd fd(*opened);
  struct stat st {};
  if (owner != nullptr && ::fstat(fd.get(), &st) != 0) return Status::FromErrno("stat " + path, errno);
  if (owner != nullptr) *owner = st.st_uid;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno("read " + path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > check.max_bytes)
      return Status::InvalidArgument(path + ": grew over the limit of " + std::to_string(check.max_bytes) + " bytes");
  }
  return out;
}

StatusOr<int> OpenDirNoFollow(const std::string& path, const FileCheck& check) {
  return OpenChecked(path, O_RDONLY | O_DIRECTORY, S_IFDIR, check);
}

StatusOr<int> OpenSocketNoFollow(const std::string& path, const FileCheck& check) {
  return OpenChecked(path, O_PATH, S_IFSOCK, check);
}

std::string ProcFdPath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

bool IsPlainName(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.' || name[0] == '-') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) return false;
  }
  return true;
}

StatusOr<bool> MakeOwnedDir(const std::string& parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid) {
  if (!IsPlainName(name)) return Status::InvalidArgument("'" + name + "' is not a plain name");
  StatusOr<int> opened = OpenDirNoFollow(parent, {});
  if (!opened.ok()) return opened.status();
  Fd dir(*opened);
  const std::string path = parent + "/" + name;
  bool made = ::mkdirat(dir.get(), name.c_str(), 0700) == 0;
  if (!made && errno != EEXIST) return Status::FromErrno("mkdir " + path, errno);
  Fd fd(::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return OpenError(dir.get(), name, path, errno);
  if (!made) {
    if (Status s = CheckOpened(fd.get(), path, S_IFDIR, {uid}); !s.ok())
      return Status::InvalidArgument(s.message() + " (an existing directory is never taken over)");
    return false;
  }
  // The mode first: once the directory is uid's, only uid (or CAP_FOWNER) may change it.
  if (::fchmod(fd.get(), mode) != 0 || ::fchown(fd.get(), uid, gid) != 0)
    return Status::FromErrno("giving " + path + " to uid " + std::to_string(uid), errno);
  if (::fsync(dir.get()) != 0) return Status::FromErrno("fsync " + parent, errno);
  return true;
}

Status PublishNew(const std::string& dir, const std::string& name, const std::string& content, mode_t mode, gid_t gid) {
  if (!IsPlainName(name)) return Status::InvalidArgument("'" + name + "' is not a plain file name");
  StatusOr<int> opened = OpenDirNoFollow(dir, {});
  if (!opened.ok()) return opened.status();
  Fd d(*opened);
  std::string tmp;
  Fd fd;
  for (int attempt = 0; attempt < 8 && fd.get() < 0; ++attempt) {
    uint64_t r = 0;
    if (::getrandom(&r, sizeof(r), 0) != static_cast<ssize_t>(sizeof(r))) r = static_cast<uint64_t>(::getpid()) * 7919 + attempt;
    tmp = "." + name + "." + std::to_string(r) + ".tmp";
    fd = Fd(::openat(d.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0 && errno != EEXIST) return Status::FromErrno("create " + dir + "/" + tmp, errno);
  }
  if (fd.get() < 0) return Status::FromErrno("create a temporary file in " + dir, EEXIST);
  const std::string tmp_path = dir + "/" + tmp;
  Status s = WriteFull(fd.get(), content.data(), content.size(), tmp_path);
  if (s.ok() && gid != static_cast<gid_t>(-1) && ::fchown(fd.get(), static_cast<uid_t>(-1), gid) != 0)
    s = Status::FromErrno("chgrp " + tmp_path, errno);
  if (s.ok() && ::fchmod(fd.get(), mode) != 0) s = Status::FromErrno("chmod " + tmp_path, errno);
  if (s.ok() && ::fsync(fd.get()) != 0) s = Status::FromErrno("fsync " + tmp_path, errno);
  if (s.ok() && ::renameat2(d.get(), tmp.c_str(), d.get(), name.c_str(), RENAME_NOREPLACE) != 0)
    s = errno == EEXIST ? Status::InvalidArgument(dir + "/" + name + " exists already")
                        : Status::FromErrno("rename " + tmp_path + " to " + name, errno);
  if (!s.ok()) {
    ::unlinkat(d.get(), tmp.c_str(), 0);
    return s;
  }
  if (::fsync(d.get()) != 0) return Status::FromErrno("fsync " + dir, errno);
  return Status::Ok();
}

}  // namespace ens
