// NoFollow: files in places another user can write, opened by a process that holds privileges
// (`ensembled serve` under run_as "submitter": docs/security.md).
//
// The rule: such a process never resolves a path through something another user may have put
// there. Every function here walks the path one component at a time with O_NOFOLLOW (a
// symbolic link anywhere in it is refused unless root owns it, as is a ".." component: root is
// trusted, its /data -> /srv/data is followed; anyone else's link is not), opens the last one without
// blocking (a FIFO or a device does not hang the caller) and checks what it opened with fstat
// before anything is read: the kind (a regular file, a directory, a socket), one link (no hard
// link to someone else's file), the owner the caller expects, a size cap. What is checked is
// the descriptor that is then used, so nothing can be swapped between the check and the use.
// Errors name the path and what was wrong with it ("<path>: a symbolic link (not followed)").
// Thread-safe (no state).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/base/status.h"

namespace ens {

struct FileCheck {
  std::optional<uid_t> owner;           // it must belong to this uid; nullopt: anyone's
  uint64_t max_bytes = uint64_t{16} << 20;  // a regular file larger than this is refused
};

// A regular file with one link, for reading (O_RDONLY | O_CLOEXEC; the caller closes it).
// NotFound when a component does not exist.
StatusOr<int> OpenNoFollow(const std::string& path, const FileCheck& check);
// Its whole text (at most check.max_bytes); *owner (when not null) is the uid that owns it.
StatusOr<std::string> ReadNoFollow(const std::string& path, const FileCheck& check, uid_t* owner = nullptr);
// A directory (O_RDONLY | O_DIRECTORY | O_CLOEXEC), its owner checked.
StatusOr<int> OpenDirNoFollow(const std::string& path, const FileCheck& check);
// A unix socket's inode, as an O_PATH descriptor: connect(2) to ProcFdPath(fd) reaches that
// very socket, whatever is renamed meanwhile.
StatusOr<int> OpenSocketNoFollow(const std::string& path, const FileCheck& check);
// "/proc/self/fd/<fd>".
std::string ProcFdPath(int fd);

// Makes directory `name` (one plain component) in the directory `parent` (reached without
// following links), gives it to uid:gid with `mode`, all through descriptors; or, when it
// exists, checks that it is a directory of `uid` (it is never taken over from anyone else).
// Returns whether it was made here.
StatusOr<bool> MakeOwnedDir(const std::string& parent, const std::string& name, mode_t mode, uid_t uid, gid_t gid);

// Writes `content` as the new file `name` of the directory `dir` that others may write (a drop
// directory): a temporary file made with O_CREAT | O_EXCL | O_NOFOLLOW, fsynced, given group
// `gid` and `mode` through its descriptor, then renamed to `name` only if nothing is there
// (AlreadyExists otherwise), and the directory fsynced. Nothing is followed or replaced.
Status PublishNew(const std::string& dir, const std::string& name, const std::string& content, mode_t mode, gid_t gid);

// A plain name: 1-128 of [A-Za-z0-9_.-], not starting with '.' or '-'. What a run may be
// called, and so what a file or directory named after it may be.
bool IsPlainName(const std::string& name);

}  // namespace ens
