// Durable file helpers: every file of the run state is written through these.
//
// WriteFileAtomic writes <path>.tmp, fsyncs it, renames it over <path> and fsyncs the
// directory, so a reader (or a restarted supervisor) sees the old or the new content, never
// a torn one. Errors name the path. Thread-safe for distinct paths.
#pragma once

#include <string>

#include "common/base/status.h"

namespace ens {

Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0600);
// The same without any fsync: readers still see the old or the new content, never a torn one,
// but after a power loss it may be either or missing. For live views rewritten every second
// (status.json), which the next rewrite replaces anyway.
Status WriteFileReplace(const std::string& path, const std::string& content, int mode = 0600);
// Writes and fsyncs `path` in place (no rename): for files inside a directory that is itself
// renamed into place afterwards, where a per-file rename would buy nothing.
Status WriteFileDurable(const std::string& path, const std::string& content, int mode = 0600);
// The whole file. Errors read "<path>: <strerror>" (kNotFound when it does not exist).
StatusOr<std::string> ReadFile(const std::string& path);
// mkdir -p with `mode` for every directory it creates. The leaf is tried first: a directory
// that exists, or whose parent does, costs one mkdir (a worker makes one a member); missing
// parents are made upwards the same way. Errors name the directory that could not be made.
Status MakeDirs(const std::string& path, int mode = 0700);
Status FsyncDir(const std::string& dir);
// Renames a directory into place atomically (removing an existing target first) and
// fsyncs the parent.
Status RenameDirAtomic(const std::string& from, const std::string& to);

// Batched durability, for many files published together (a pack's member directories):
// write each with WriteFileUnsynced, make them all durable with one SyncFileSystem, move
// each directory into place with SwapDirInto, then FsyncDir each parent once. Two flushes
// in all instead of one per file.
Status WriteFileUnsynced(const std::string& path, const std::string& content, int mode = 0600);
// syncfs(2) of the filesystem holding `path`: everything written there before is on disk
// after it returns ok (a write-back error since the last call is reported).
Status SyncFileSystem(const std::string& path);
// RenameDirAtomic without the parent fsync.
Status SwapDirInto(const std::string& from, const std::string& to);
// rm -rf; absent is fine.
Status RemoveTree(const std::string& path);
bool PathExists(const std::string& path);
std::string ParentDir(const std::string& path);
// The last component of `path` (all of it when it has no slash).
std::string BaseName(const std::string& path);

}  // namespace ens
