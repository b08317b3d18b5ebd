// Test support for the "run it as a service" tests: starting ensembled the way systemd does
// (NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID = the child's own pid, RUNTIME_DIRECTORY),
// a fake notify socket that collects sd_notify datagrams, a raw control-socket client, a
// tiny HTTP/1.0 client, a free TCP port, and bounded polling.
// Header-only; builds on env_spawn.h. Not thread-safe (call from the test's thread).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdio>
#include <functional>
#include <regex>

#include "env_spawn.h"

namespace ens::testing {

// Like SpawnEnv(), and when `watchdog_pid_self` is set the child gets WATCHDOG_PID=<its own
// pid>, written after fork and before exec (systemd's contract: sd_watchdog_enabled() ignores
// WATCHDOG_USEC meant for another process). Everything is allocated before fork; the child
// only formats digits into a preallocated buffer, dup2s and execs.
inline pid_t SpawnNotifyEnv(const std::vector<std::string>& argv, const std::string& out_file,
                            const std::string& err_file, const EnvChanges& env, bool watchdog_pid_self) {
  EnvChanges changes = env;
  changes.set.erase("WATCHDOG_PID");  // only the child's own pid, or none
  changes.unset.push_back("WATCHDOG_PID");
  std::vector<std::string> env_strings = EnvironmentWith(changes), argv_copy = argv;
  std::vector<char*> envp = NullTerminated(env_strings), args = NullTerminated(argv_copy);
  char pid_var[48] = "WATCHDOG_PID=";
  if (watchdog_pid_self) envp.insert(envp.end() - 1, pid_var);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (watchdog_pid_self) {
      char digits[24];
      int n = 0;
      for (long p = static_cast<long>(::getpid()); p > 0 && n < 23; p /= 10) digits[n++] = static_cast<char>('0' + p % 10);
      size_t at = std::strlen(pid_var);
      while (n > 0) pid_var[at++] = digits[--n];
      pid_var[at] = '\0';
    }
    ExecRedirected(args.data(), envp.data(), out_file.c_str(), err_file.c_str());
  }
  return pid;
}

// One datagram received on the fake NOTIFY_SOCKET.
struct NotifyMessage {
  double at_s = 0;  // seconds since the listener was created
  std::string text;
};

// A Unix datagram socket bound at `path`, standing in for systemd's notify socket.
class NotifyListener {
 public:
  explicit NotifyListener(const std::string& path) : path_(path), t0_(SteadyClock::now()) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ::unlink(path.c_str());
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~NotifyListener() {
    if (fd_ >= 0) ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool ok() const { return bound_; }
  double Now() const { return SecondsSince(t0_); }
  // Waits up to timeout_ms for datagrams; returns the ones that arrived (also kept in all()).
  std::vector<NotifyMessage> Poll(int timeout_ms) {
    std::vector<NotifyMessage> got;
    struct pollfd p {fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return got;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n < 0) break;
      got.push_back({Now(), std::string(buf, static_cast<size_t>(n))});
    }
    all_.insert(all_.end(), got.begin(), got.end());
    return got;
  }
  const std::vector<NotifyMessage>& all() const { return all_; }

 private:
  std::string path_;
  SteadyClock::time_point t0_;
  int fd_ = -1;
  bool bound_ = false;
  std::vector<NotifyMessage> all_;
};

// The NUL-separated environment of a live process, as "K=V" strings.
inline std::vector<std::string> EnvironOf(pid_t pid) {
  std::string raw = ReadText("/proc/" + std::to_string(pid) + "/environ");
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= raw.size(); ++i)
    if (i == raw.size() || raw[i] == '\0') {
      if (i > start) out.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

// Polls `pred` every `step_ms` until it holds or timeout_s passes; returns whether it held.
inline bool WaitUntil(double timeout_s, const std::function<bool()>& pred, int step_ms = 50) {
  auto t0 = SteadyClock::now();
  for (;;) {
    if (pred()) return true;
    if (SecondsSince(t0) > timeout_s) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
  }
}

// A client connected to the Unix stream socket at `path` (blocking), or -1.
inline int ConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// What `fd` sends until EOF, or until timeout_ms have passed.
inline std::string ReadToEnd(int fd, int timeout_ms) {
  std::string reply;
  auto t0 = SteadyClock::now();
  char buf[4096];
  for (;;) {
    int left = timeout_ms - static_cast<int>(SecondsSince(t0) * 1000);
    if (left <= 0) break;
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) break;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  return reply;
}

// Connects to a Unix stream socket, sends `request` verbatim, reads until EOF (or timeout).
// Returns the reply text, or "<connect failed: ...>".
inline std::string RawUnixRequest(const std::string& path, const std::string& request, int timeout_ms = 5000,
                                  bool half_close = false) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::string e = std::string("<connect failed: ") + std::strerror(errno) + ">";
    ::close(fd);
    return e;
  }
  if (!request.empty()) (void)::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string reply = ReadToEnd(fd, timeout_ms);
  ::close(fd);
  return reply;
}

// A TCP port on 127.0.0.1 that was free a moment ago (bind port 0, read it back, close).
inline int FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

struct HttpReply {
  bool ok = false;  // a response was read
  int status = 0;
  std::string headers, body, error;
};

// "GET <path> HTTP/1.0" to host:port (IPv4 literal), reading until the server closes.
// `headers`: more request header lines, each ending in "\r\n".
inline HttpReply HttpGet(const std::string& host, int port, const std::string& path, int timeout_ms = 5000,
                         const std::string& headers = "") {
  HttpReply r;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    r.error = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return r;
  }
  std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n" + headers + "\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  auto t0 = SteadyClock::now();
  char buf[8192];
  for (;;) {
    int left = timeout_ms - static_cast<int>(SecondsSince(t0) * 1000);
    if (left <= 0) {
      r.error = "timeout";
      break;
    }
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) {
    if (r.error.empty()) r.error = "no complete response header (" + std::to_string(raw.size()) + " bytes)";
    return r;
  }
  r.headers = raw.substr(0, end);
  r.body = raw.substr(end + 4);
  std::smatch m;
  if (std::regex_search(r.headers, m, std::regex(R"(^HTTP/1\.[01] (\d{3}))"))) {
    r.status = std::stoi(m[1]);
    r.ok = true;
  } else {
    r.error = "bad status line";
  }
  return r;
}

// `ensemblectl <args...>`, bounded.
inline TimedRun Ctl(const std::vector<std::string>& args, const std::string& scratch, double timeout_s = 30) {
  std::vector<std::string> argv = {BinaryPath("ensemblectl")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunWithEnv(argv, scratch, {}, timeout_s);
}

// `ensemblectl status -s DIR --json`, parsed (discarded json on failure).
inline nlohmann::json CtlStatusJson(const std::string& state_dir, const std::string& scratch) {
  TimedRun r = Ctl({"status", "-s", state_dir, "--json"}, scratch);
  if (r.code != 0) return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(r.out, nullptr, false);
}

// member_done records of `round` (-1: any round) in the journal right now.
inline int MembersDone(const std::string& state_dir, int round = -1) {
  int n = 0;
  for (const auto& r : JournalOf(state_dir))
    if (r.value("event", "") == "member_done" && (round < 0 || r.value("round", -1) == round)) ++n;
  return n;
}

inline int RoundsCommitted(const std::string& state_dir) { return CountEvents(JournalOf(state_dir), "round_committed"); }

// A daemon the test started: remembers its exit once reaped (so a reaped pid is never waited
// for or signalled again), and kills + reaps it on scope exit (a failed REQUIRE leaves no
// orphan; its workers follow through PR_SET_PDEATHSIG).
class Daemon {
 public:
  explicit Daemon(pid_t pid) : pid_(pid) {}
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  ~Daemon() {
    if (!Exited()) {
      ::kill(pid_, SIGKILL);
      WaitAtMost(30);
    }
  }
  pid_t pid() const { return pid_; }
  // Reaps it if it has exited.
  bool Exited() {
    if (!code_ && pid_ > 0) code_ = TryWait(pid_);
    return code_.has_value() || pid_ <= 0;
  }
  std::optional<int> code() const { return code_; }
  void Signal(int sig) {
    if (!Exited()) ::kill(pid_, sig);
  }
  // Exit code (or 128 + signal); on timeout SIGKILLs it, sets *timed_out and returns -1.
  int WaitAtMost(double timeout_s, bool* timed_out = nullptr) {
    if (timed_out) *timed_out = false;
    auto t0 = SteadyClock::now();
    while (!Exited()) {
      if (SecondsSince(t0) > timeout_s) {
        ::kill(pid_, SIGKILL);
        code_ = Wait(pid_);
        if (timed_out) *timed_out = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return code_ ? *code_ : -1;
  }
  // SIGTERM (twice when `now`: stop at once), then a bounded wait.
  int Stop(bool now = false, double timeout_s = 60) {
    Signal(SIGTERM);
    if (now) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Signal(SIGTERM);
    }
    return WaitAtMost(timeout_s);
  }

 private:
  pid_t pid_;
  std::optional<int> code_;
};

}  // namespace ens::testing
