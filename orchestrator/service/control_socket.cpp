#include "orchestrator/service/control_socket.h"

#include "common/ipc/control_client.h"
#include "common/ipc/control_protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/base/atomic_file.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;

// How often a reply that did not fit the socket buffer is pushed on (no fd announces room:
// PollFds() asks for POLLIN only).
constexpr int kControlWriteRetryMs = 50;

}  // namespace

ControlSocket::~ControlSocket() {
  for (Connection& c : conns_) ::close(c.fd);
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

Status ControlSocket::Listen(const std::string& path, mode_t mode) {
  sockaddr_un addr;
  if (!UnixSocketAddress(path, &addr)) return Status::InvalidArgument(path + ": too long for a Unix socket path");
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) return Status::FromErrno("socket", errno);
  // A socket file left by a crashed daemon is replaced; one that a live daemon answers on is not.
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool live = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  if (probe >= 0) ::close(probe);
  if (live) return Status::InvalidArgument(path + ": another daemon is listening on this control socket");
  ::unlink(path.c_str());
  mode_t old = ::umask(0177);
  int rc = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::umask(old);
  if (rc != 0) return Status::FromErrno("bind " + path, errno);
  ::chmod(path.c_str(), mode);
  if (::listen(fd_, kControlAcceptsPerServe) != 0) return Status::FromErrno("listen " + path, errno);
  path_ = path;
  return Status::Ok();
}

void ControlSocket::Serve(const Handler& handler) {
  ServeWithPeer([&](const nlohmann::json& request, const ControlPeer&) { return handler(request); });
}

void ControlSocket::ServeWithPeer(const PeerHandler& handler) {
  if (fd_ < 0 || serving_) return;
  serving_ = true;
  struct Unset {
    bool* flag;
    ~Unset() { *flag = false; }  // also when a handler throws through
  } unset{&serving_};
  Accept(Clock::now());
  for (Connection& c : conns_) {
    if (c.out.empty() && c.ticket == 0) Read(c, handler);
    if (!c.out.empty() && !c.done) Write(c);
    Expire(c, Clock::now());
  }
  for (Connection& c : conns_)
    if (c.done) ::close(c.fd);
  conns_.erase(std::remove_if(conns_.begin(), conns_.end(), [](const Connection& c) { return c.done; }), conns_.end());
  LogTrouble(Clock::now());
}

void ControlSocket::Accept(Clock::time_point now) {
  for (int i = 0; i < kControlAcceptsPerServe; ++i) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left (or a client that gave up meanwhile)
    ControlPeer peer;
    struct ucred cred {};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer = {cred.uid, cred.gid, cred.pid};
    int same_uid = static_cast<int>(
        std::count_if(conns_.begin(), conns_.end(), [&](const Connection& c) { return c.peer.uid == peer.uid; }));
    if (static_cast<int>(conns_.size()) >= limits_.max_connections || same_uid >= limits_.max_per_uid) {
      // One non-blocking try: the reply is far smaller than a socket buffer.
      std::string refusal = ControlRefused("too many open control connections (at most " +
                                           std::to_string(limits_.max_connections) + " in all and " +
                                           std::to_string(limits_.max_per_uid) + " per uid); try again")
                                .dump() + "\n";
      ::send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::close(fd);
      ++refused_;
      continue;
    }
    Connection c;
    c.fd = fd;
    c.peer = peer;
    c.deadline = now + std::chrono::milliseconds(limits_.deadline_ms);
    conns_.push_back(std::move(c));
  }
}

void ControlSocket::Read(Connection& c, const PeerHandler& handler) {
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(c.fd, buf, sizeof(buf));
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (c.in.find('\n', c.in.size() - static_cast<size_t>(n)) != std::string::npos || c.in.size() > kControlMaxLine)
        break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the rest later
    break;  // EOF, or an error: what came is all there is
  }
  // Here: a newline came, or the line is over the cap, or the client is done sending.
  size_t nl = c.in.find('\n');
  if ((nl == std::string::npos ? c.in.size() : nl) > kControlMaxLine) {
    std::string().swap(c.in);
    Answer(c, ControlRefused("request line longer than " + std::to_string(kControlMaxLine) + " bytes"));
    return;
  }
  if (nl != std::string::npos) c.in.resize(nl);
  nlohmann::json req = nlohmann::json::parse(c.in, nullptr, false);
  std::string().swap(c.in);
  if (req.is_discarded() || !req.is_object() || !req.contains("cmd") || !req["cmd"].is_string()) {
    Answer(c, ControlRefused("request must be a JSON object with a string \"cmd\""));
    return;
  }
  nlohmann::json reply;
  handling_ = &c;
  try {
    reply = handler(req, c.peer);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type ({"run": 5})
    c.ticket = 0;
    reply = ControlRefused(std::string("malformed request: ") + e.what());
  }
  handling_ = nullptr;
  if (c.ticket == 0) Answer(c, std::move(reply));
}

uint64_t ControlSocket::Defer() {
  if (handling_ == nullptr) return 0;
  handling_->ticket = ++last_ticket_;
  handling_->deadline = Clock::now() + std::chrono::milliseconds(kControlDeferredMs);
  return handling_->ticket;
}

void ControlSocket::Reply(uint64_t ticket, nlohmann::json reply) {
  for (auto it = conns_.begin(); it != conns_.end(); ++it) {
    if (ticket == 0 || it->ticket != ticket || it->done) continue;
    it->ticket = 0;
    Answer(*it, std::move(reply));
    Write(*it);  // what does not fit now: in Serve()
    if (it->done && !serving_) {
      ::close(it->fd);
      conns_.erase(it);
    }
    return;
  }
}

void ControlSocket::Answer(Connection& c, nlohmann::json reply) {
  // Invalid UTF-8 (a file name, say) is replaced, not thrown over.
  c.out = reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  c.written = 0;
  c.deadline = Clock::now() + std::chrono::milliseconds(limits_.deadline_ms);
}

void ControlSocket::Write(Connection& c) {
  while (c.written < c.out.size()) {
    ssize_t n = ::send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.written += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;  // the client reads slowly: the rest later, until its deadline
    } else {
      break;  // gone
    }
  }
  c.done = true;
}

void ControlSocket::Expire(Connection& c, Clock::time_point now) {
  if (c.done || now < c.deadline) return;
  ++dropped_;
  if (!c.out.empty()) {  // the reply was not taken in time
    c.done = true;
    return;
  }
  if (c.ticket != 0) {
    c.ticket = 0;
    Answer(c, ControlRefused("the daemon did not answer in time"));
    Write(c);
    c.done = true;
    return;
  }
  Answer(c, ControlRefused("request not received in time (a whole line within " +
                           std::to_string(limits_.deadline_ms) + " ms of connecting)"));
  Write(c);
  c.done = true;  // whatever of the error reply did not fit goes unsaid
}

void ControlSocket::LogTrouble(Clock::time_point now) {
  if (refused_ + dropped_ == 0) return;
  if (last_log_ != Clock::time_point{} && now - last_log_ < std::chrono::milliseconds(kControlLogEveryMs)) return;
  spdlog::warn("control socket {}: {} connection(s) refused (at most {} open, {} per uid), {} dropped (no whole "
               "request, or the reply not read, within {} ms) since the last such line",
               path_, refused_, limits_.max_connections, limits_.max_per_uid, dropped_, limits_.deadline_ms);
  refused_ = dropped_ = 0;
  last_log_ = now;
}

std::vector<int> ControlSocket::PollFds() const {
  std::vector<int> fds;
  if (fd_ >= 0) fds.push_back(fd_);
  for (const Connection& c : conns_)
    if (c.out.empty() && c.ticket == 0) fds.push_back(c.fd);
  return fds;
}

int ControlSocket::NextWakeMs() const {
  if (conns_.empty()) return -1;
  auto now = Clock::now();
  auto next = conns_.front().deadline;
  for (const Connection& c : conns_) {
    next = std::min(next, c.deadline);
    if (!c.out.empty()) next = std::min(next, now + std::chrono::milliseconds(kControlWriteRetryMs));
  }
  if (next <= now) return 0;
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count()) + 1;
}

}  // namespace ens
