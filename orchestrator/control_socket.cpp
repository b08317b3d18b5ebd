#include "orchestrator/control_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/atomic_file.h"
#include "common/run_layout.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;

bool FillAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) return false;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Reads up to a newline or EOF before the deadline; false on timeout/error.
bool ReadLine(int fd, Clock::time_point deadline, std::string* out) {
  char buf[4096];
  while (out->find('\n') == std::string::npos && out->size() < (1u << 20)) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
    if (left <= 0) return false;
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  if (auto nl = out->find('\n'); nl != std::string::npos) out->resize(nl);
  return true;
}

void WriteAll(int fd, const std::string& s, Clock::time_point deadline) {
  size_t off = 0;
  while (off < s.size() && Clock::now() < deadline) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      struct pollfd p {fd, POLLOUT, 0};
      ::poll(&p, 1, 50);
    } else {
      return;
    }
  }
}

}  // namespace

ControlSocket::~ControlSocket() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
}

Status ControlSocket::Listen(const std::string& path, mode_t mode) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) return Status::InvalidArgument(path + ": too long for a Unix socket path");
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
  if (::listen(fd_, 16) != 0) return Status::FromErrno("listen " + path, errno);
  path_ = path;
  return Status::Ok();
}

void ControlSocket::Serve(const Handler& handler) {
  ServeWithPeer([&](const nlohmann::json& request, const ControlPeer&) { return handler(request); });
}

void ControlSocket::ServeWithPeer(const PeerHandler& handler) {
  for (;;) {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    ControlPeer peer;
    struct ucred cred {};
    socklen_t len = sizeof(cred);
    if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) peer = {cred.uid, cred.gid, cred.pid};
    auto deadline = Clock::now() + std::chrono::milliseconds(500);
    std::string line;
    nlohmann::json reply;
    if (!ReadLine(c, deadline, &line)) {
      reply = {{"ok", false}, {"error", "request not received in time"}};
    } else {
      nlohmann::json req = nlohmann::json::parse(line, nullptr, false);
      if (req.is_discarded() || !req.is_object() || !req.contains("cmd") || !req["cmd"].is_string())
        reply = {{"ok", false}, {"error", "request must be a JSON object with a string \"cmd\""}};
      else
        reply = handler(req, peer);
    }
    WriteAll(c, reply.dump() + "\n", deadline + std::chrono::milliseconds(500));
    ::close(c);
  }
}

StatusOr<nlohmann::json> ControlRequest(const std::string& path, const nlohmann::json& request, int timeout_ms) {
  sockaddr_un addr;
  if (!FillAddress(path, &addr)) return Status::InvalidArgument(path + ": too long for a Unix socket path");
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::FromErrno("socket", errno);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno("connect " + path + " (is the daemon running?)", err);
  }
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  WriteAll(fd, request.dump() + "\n", deadline);
  std::string line;
  bool got = ReadLine(fd, deadline, &line);
  ::close(fd);
  if (!got) return Status::Timeout(path + ": no reply within " + std::to_string(timeout_ms) + " ms");
  nlohmann::json reply = nlohmann::json::parse(line, nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) return Status::Corruption(path + ": reply is not a JSON object");
  return reply;
}

std::string ControlSocketPath(const std::string& configured, const std::string& run_name,
                              const std::string& state_dir) {
  if (!configured.empty()) return configured;
  if (const char* rt = std::getenv("RUNTIME_DIRECTORY")) {
    std::string dir(rt);
    if (auto colon = dir.find(':'); colon != std::string::npos) dir.resize(colon);
    return dir + "/" + run_name + ".sock";
  }
  return state_dir + "/control.sock";
}

std::string RunControlSocket(const std::string& state_dir) {
  auto text = ReadFile(RunLayout(state_dir).StatusFile());
  if (text.ok()) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("control_socket") && j["control_socket"].is_string())
      return j["control_socket"].get<std::string>();
  }
  return state_dir + "/control.sock";
}

}  // namespace ens
