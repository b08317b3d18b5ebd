// WorkerChannel: one worker's two-way message link with its supervisor, a kernel-owned
// AF_UNIX SOCK_SEQPACKET socket pair made for each worker process the supervisor starts.
//
// Why a socket pair (until December these were POSIX message queues, one per worker plus one):
// - No budget to run out of. A queue of 4 messages of 8 KiB costs ~35 KiB of the per-user
//   RLIMIT_MSGQUEUE (800 KiB on a stock Debian: ~22 workers for every daemon of that user
//   together). A socket pair costs one descriptor in the supervisor and nothing in any
//   per-user IPC budget, so any number of workers fit.
// - Nothing to leave behind. The pair has no name: the kernel frees it with the last process
//   holding an end, so a supervisor killed with SIGKILL leaves nothing for a later run to trip
//   over or to reclaim, and no other process can open it.
// - Every death is seen. SOCK_SEQPACKET keeps message boundaries and a send is atomic, so a
//   process killed mid-send leaves no half message; the peer of a dead process reads
//   end-of-stream (Received::kClosed) after every message the dead one sent, so a report sent
//   just before a worker exits is never lost, and a worker learns its supervisor is gone.
// - Like the queues it replaces, the kernel holds no user-space lock for us, and the descriptor
//   is pollable (the supervisor waits on all of them through one epoll descriptor).
// Both ends are close-on-exec: the executor dup2s the worker's end to kWorkerChannelFd in the
// child, so each worker holds its own end and nothing else.
// A message is at most kMaxMessageBytes (common/ipc/protocol.h): a longer one is refused by Send
// and, when it arrives anyway, discarded by Receive with an error. A zero-byte message is
// told apart from the peer's close.
//
// A remote worker's link (the TCP transport, orchestrator/workers/transport.h) is a connected stream
// socket taken over with AdoptStream: the same contract, each message framed on the wire as a
// 4-byte little-endian length and its bytes. A send that times out half written closes the
// channel (the stream could not be resynchronised); an oversized message is skipped by length.
// Move-only. Send may be called from two threads at once (each message is atomic); Receive
// from one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/base/status.h"

namespace ens {

// The descriptor a worker finds its end on (`ensemble-worker serve --channel-fd`).
inline constexpr int kWorkerChannelFd = 3;

class WorkerChannel {
 public:
  struct Received {
    enum Kind { kNothing, kMessage, kClosed } kind = kNothing;  // kNothing: timed out
    std::string bytes;                                          // kMessage
  };

  WorkerChannel();
  WorkerChannel(WorkerChannel&& o) noexcept;
  WorkerChannel& operator=(WorkerChannel&& o) noexcept;
  WorkerChannel(const WorkerChannel&) = delete;
  WorkerChannel& operator=(const WorkerChannel&) = delete;
  ~WorkerChannel();

  // A connected pair: {supervisor's end, worker's end}, both close-on-exec and non-blocking.
  static StatusOr<std::pair<WorkerChannel, WorkerChannel>> Pair();
  // Takes ownership of an inherited end. Fails (naming fd) when fd is not a SOCK_SEQPACKET socket.
  static StatusOr<WorkerChannel> Adopt(int fd);
  // Takes ownership of a connected SOCK_STREAM socket (a remote worker's link), length-framed.
  static StatusOr<WorkerChannel> AdoptStream(int fd);

  // Sends one message, waiting up to timeout_ms for room (0: not at all; negative: forever).
  // Timeout when there is no room; IOError "closed" when the peer is gone.
  Status Send(std::string_view bytes, int timeout_ms);
  // Receives one message, waiting up to timeout_ms (0: poll; negative: forever).
  // InvalidArgument for a message over kMaxMessageBytes (it is discarded; the next one is fine).
  StatusOr<Received> Receive(int timeout_ms);

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  bool stream() const { return stream_ != nullptr; }
  void Close();

 private:
  struct StreamState;
  explicit WorkerChannel(int fd);
  Status SendFramed(std::string_view bytes, int timeout_ms);
  StatusOr<Received> ReceiveFramed(int timeout_ms);
  int fd_ = -1;
  std::unique_ptr<StreamState> stream_;  // set for a stream socket
};

}  // namespace ens
