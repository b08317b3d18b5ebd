#include "common/ipc/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/base/atomic_file.h"
#include "common/ipc/control_protocol.h"
#include "common/state/run_layout.h"

namespace ens {
namespace {

using Clock = std::chrono::steady_clock;

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

bool UnixSocketAddress(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr->sun_path)) return false;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

StatusOr<nlohmann::json> ControlRequest(const std::string& path, const nlohmann::json& request, int timeout_ms) {
  sockaddr_un addr;
  if (!UnixSocketAddress(path, &addr)) return Status::InvalidArgument(path + ": too long for a Unix socket path");
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

ControlCall::ControlCall(const std::string& path, const nlohmann::json& request, int timeout_ms, const std::string& named)
    : path_(named.empty() ? path : named), deadline_(Clock::now() + std::chrono::milliseconds(timeout_ms)), timeout_ms_(timeout_ms) {
  sockaddr_un addr;
  if (!UnixSocketAddress(path, &addr)) {
    Finish(Status::InvalidArgument(path_ + ": too long for a Unix socket path"));
    return;
  }
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd_ < 0) {
    Finish(Status::FromErrno("socket", errno));
    return;
  }
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Finish(Status::FromErrno("connect " + path_ + " (is the daemon running?)", errno));
    return;
  }
  // A request is far smaller than a socket buffer: one send takes it whole.
  const std::string line = request.dump() + "\n";
  if (::send(fd_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT) != static_cast<ssize_t>(line.size()))
    Finish(Status::IOError(path_ + ": the request could not be sent"));
}

ControlCall::~ControlCall() {
  if (fd_ >= 0) ::close(fd_);
}

void ControlCall::Finish(StatusOr<nlohmann::json> result) {
  result_ = std::move(result);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ControlCall::Poll() {
  if (fd_ < 0) return true;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      if (in_.size() > kControlMaxLine) break;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (in_.find('\n') != std::string::npos) break;
      if (Clock::now() < deadline_) return false;
      Finish(Status::Timeout(path_ + ": no reply within " + std::to_string(timeout_ms_) + " ms"));
      return true;
    }
    break;  // EOF (the reply is all there) or an error
  }
  if (auto nl = in_.find('\n'); nl != std::string::npos) in_.resize(nl);
  nlohmann::json reply = nlohmann::json::parse(in_, nullptr, false);
  if (reply.is_discarded() || !reply.is_object())
    Finish(Status::Corruption(path_ + ": reply is not a JSON object"));
  else
    Finish(std::move(reply));
  return true;
}

int ControlCall::NextWakeMs() const {
  if (fd_ < 0) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left) + 1;
}

std::string ControlSocketPath(const std::string& configured, const std::string& run_name,
                              const std::string& state_dir) {
  if (!configured.empty()) return configured;
  if (const char* rt = std::getenv("RUNTIME_DIRECTORY")) {
    std::string dir(rt);
    if (auto colon = dir.find(':'); colon != std::string::npos) dir.resize(colon);
    return dir + "/" + run_name + ".sock";
  }
  return RunLayout(state_dir).ControlSocket();
}

std::string RunControlSocket(const std::string& state_dir) {
  auto text = ReadFile(RunLayout(state_dir).StatusFile());
  if (text.ok()) {
    auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_object() && j.contains("control_socket") && j["control_socket"].is_string())
      return j["control_socket"].get<std::string>();
  }
  return RunLayout(state_dir).ControlSocket();
}

}  // namespace ens
