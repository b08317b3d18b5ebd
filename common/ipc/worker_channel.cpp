#include "common/ipc/worker_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/ipc/protocol.h"

namespace ens {

namespace {

using Clock = std::chrono::steady_clock;

int MillisLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<int64_t>(0, left));
}

// Waits for `events` on fd until the deadline (timeout_ms < 0: forever); true when ready.
bool WaitFor(int fd, short events, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    struct pollfd p {fd, events, 0};
    int r = ::poll(&p, 1, timeout_ms < 0 ? -1 : MillisLeft(deadline));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

// recv() returned 0: a zero-byte message, or the peer closed? Only a closed peer sets POLLHUP
// (or POLLRDHUP) on a Unix socket.
bool PeerClosed(int fd) {
  struct pollfd p {fd, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP)) != 0;
}

}  // namespace

struct WorkerChannel::StreamState {
  std::mutex send_mu;  // a framed message is several writes: one sender at a time
  std::string in;      // bytes received and not yet returned
  size_t skip = 0;     // bytes of an oversized message still to drop
};

WorkerChannel::WorkerChannel() = default;
WorkerChannel::WorkerChannel(int fd) : fd_(fd) {}
WorkerChannel::~WorkerChannel() { Close(); }

WorkerChannel::WorkerChannel(WorkerChannel&& o) noexcept : fd_(std::exchange(o.fd_, -1)), stream_(std::move(o.stream_)) {}

WorkerChannel& WorkerChannel::operator=(WorkerChannel&& o) noexcept {
  if (this != &o) {
    Close();
    fd_ = std::exchange(o.fd_, -1);
    stream_ = std::move(o.stream_);
  }
  return *this;
}

void WorkerChannel::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

StatusOr<std::pair<WorkerChannel, WorkerChannel>> WorkerChannel::Pair() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
    int err = errno;
    Status s = Status::FromErrno("socketpair (a worker's channel)", err);
    if (err == EMFILE)
      return Status::IOError(s.message() + " (this process's descriptor limit, RLIMIT_NOFILE, is used up)");
    return s;
  }
  return std::make_pair(WorkerChannel(fds[0]), WorkerChannel(fds[1]));
}

StatusOr<WorkerChannel> WorkerChannel::Adopt(int fd) {
  struct stat st {};
  int type = 0;
  socklen_t len = sizeof(type);
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
      ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET)
    return Status::InvalidArgument("no worker channel on descriptor " + std::to_string(fd) +
                                   " (ensemble-worker serve is started by ensembled, which passes it)");
  // Close-on-exec from here on: what the worker runs must not hold the supervisor's link.
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  return WorkerChannel(fd);
}

StatusOr<WorkerChannel> WorkerChannel::AdoptStream(int fd) {
  int type = 0;
  socklen_t len = sizeof(type);
  if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return Status::InvalidArgument("descriptor " + std::to_string(fd) + " is not a stream socket");
  int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  WorkerChannel c(fd);
  c.stream_ = std::make_unique<StreamState>();
  return c;
}

Status WorkerChannel::SendFramed(std::string_view bytes, int timeout_ms) {
  std::string frame(4 + bytes.size(), '\0');
  const uint32_t n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) frame[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(frame.data() + 4, bytes.data(), bytes.size());
  std::lock_guard<std::mutex> lock(stream_->send_mu);
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t w = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      sent += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN))
      return Status::IOError("worker channel closed by the other side");
    if (w < 0 && errno != EAGAIN) return Status::FromErrno("send on a worker channel", errno);
    int left = timeout_ms < 0 ? -1 : MillisLeft(deadline);
    if (left == 0 || !WaitFor(fd_, POLLOUT, left)) {
      if (sent == 0) return Status::Timeout("worker channel is full");
      ::shutdown(fd_, SHUT_RDWR);  // half a frame on the wire: the stream cannot be trusted any more
      return Status::IOError("worker channel closed: a message timed out half sent");
    }
  }
  return Status::Ok();
}

StatusOr<WorkerChannel::Received> WorkerChannel::ReceiveFramed(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  std::string& in = stream_->in;
  for (;;) {
    if (stream_->skip > 0) {
      size_t drop = std::min(stream_->skip, in.size());
      in.erase(0, drop);
      stream_->skip -= drop;
    }
    if (stream_->skip == 0 && in.size() >= 4) {
      uint32_t n = 0;
      for (int i = 3; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(in[static_cast<size_t>(i)]);
      if (n > kMaxMessageBytes) {
        in.erase(0, 4);
        stream_->skip = n;
        return Status::InvalidArgument("a message of " + std::to_string(n) + " bytes (more than " +
                                       std::to_string(kMaxMessageBytes) + ") was discarded");
      }
      if (in.size() >= 4 + size_t{n}) {
        Received r{Received::kMessage, in.substr(4, n)};
        in.erase(0, 4 + size_t{n});
        return r;
      }
    }
    char buf[65536];
    ssize_t got = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (got > 0) {
      in.append(buf, static_cast<size_t>(got));
      continue;
    }
    if (got == 0 || (got < 0 && errno == ECONNRESET)) return Received{Received::kClosed, {}};
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::FromErrno("recv on a worker channel", errno);
    int left = timeout_ms < 0 ? -1 : MillisLeft(deadline);
    if (left == 0 || !WaitFor(fd_, POLLIN, left)) return Received{};
  }
}

Status WorkerChannel::Send(std::string_view bytes, int timeout_ms) {
  if (bytes.size() > kMaxMessageBytes)
    return Status::InvalidArgument("message of " + std::to_string(bytes.size()) + " bytes is larger than the " +
                                   std::to_string(kMaxMessageBytes) + " a worker channel carries");
  if (stream_) return SendFramed(bytes, timeout_ms);
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    // MSG_NOSIGNAL: a closed peer is an error to report, not a SIGPIPE.
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return Status::Ok();
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
      return Status::IOError("worker channel closed by the other side");
    if (errno != EAGAIN) return Status::FromErrno("send on a worker channel", errno);
    int left = timeout_ms < 0 ? -1 : MillisLeft(deadline);
    if (left == 0 || !WaitFor(fd_, POLLOUT, left)) return Status::Timeout("worker channel is full");
  }
}

StatusOr<WorkerChannel::Received> WorkerChannel::Receive(int timeout_ms) {
  if (stream_) return ReceiveFramed(timeout_ms);
  std::vector<char> buf(kMaxMessageBytes);
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    // MSG_TRUNC: the message's real length even when it does not fit the buffer.
    ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n > static_cast<ssize_t>(buf.size()))
      return Status::InvalidArgument("a message of " + std::to_string(n) + " bytes (more than " +
                                     std::to_string(kMaxMessageBytes) + ") was discarded");
    if (n > 0 || (n == 0 && !PeerClosed(fd_)))
      return Received{Received::kMessage, std::string(buf.data(), static_cast<size_t>(n))};
    if (n == 0) return Received{Received::kClosed, {}};
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return Received{Received::kClosed, {}};
    if (errno != EAGAIN) return Status::FromErrno("recv on a worker channel", errno);
    int left = timeout_ms < 0 ? -1 : MillisLeft(deadline);
    if (left == 0 || !WaitFor(fd_, POLLIN, left)) return Received{};
  }
}

}  // namespace ens
