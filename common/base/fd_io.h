// FdIo: whole reads and writes on blocking descriptors (pipes, files), retried across EINTR
// and short transfers. Every whole transfer on a blocking descriptor goes through these. The
// read/write/send/recv calls elsewhere do another thing: non-blocking sockets that give up
// at a deadline or on EAGAIN (worker_channel.cpp, control_socket.cpp), draining a signalfd or
// an inotify descriptor, and a child's stdin and stdout served in turn under poll
// (subprocess.cpp, command_member.cpp). Errors name `what` (a path, "predict stream") and the
// errno text. The writes go through CurrentEnv() (env.h), so a test's Env sees every whole
// write of the run state; the reads ask the OS.
// Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/base/status.h"

namespace ens {

Status WriteFull(int fd, const void* data, size_t n, const std::string& what);
// Reads exactly n bytes. An end of input before the first byte sets *eof (when eof is not
// null) and returns ok; one after it is an error ("ended inside ...").
Status ReadFull(int fd, void* data, size_t n, const std::string& what, bool* eof = nullptr);
// At a file offset (the descriptor's own offset is unchanged).
Status PwriteFull(int fd, const void* data, size_t n, uint64_t offset, const std::string& what);
// Reads exactly n bytes at `offset`; a file that ends before is Corruption ("<what>: truncated ...").
Status PreadFull(int fd, void* data, size_t n, uint64_t offset, const std::string& what);

}  // namespace ens
