// ControlSocket: the daemon's Unix socket for ensemblectl (mode 0600 unless asked otherwise).
//
// Protocol: the client connects, sends one JSON object on one line
// ({"cmd": "status" | "stop" | "pause" | "resume" | "reload"}), reads one JSON line back
// ({"ok": bool, ...}) and the connection closes. A request line holds at most kControlMaxLine
// bytes (longer: an error reply). A client that closes its side sends its last line without
// newline.
//
// The daemon serves it from its main loop without ever waiting on a client: the socket keeps a
// table of open connections across Serve() calls, and each call accepts what is pending
// (at most kControlAcceptsPerServe), reads whatever bytes are there, answers each connection
// that has a whole line (the handler runs in the call), writes replies without blocking and
// drops connections past their deadline: a request not whole within ControlLimits::deadline_ms
// of the connect gets {"ok": false, "error": ...}; a reply not taken within deadline_ms of
// being ready is abandoned. Connections are bounded in all and per peer uid (SO_PEERCRED): one
// past a bound gets {"ok": false, "error": "too many open control connections ..."} and is
// closed at once. Refusals and drops are logged at most once per kControlLogEveryMs, with
// counts. A daemon polls PollFds() (POLLIN) and calls Serve() when one is ready and at the
// latest NextWakeMs() from now (deadlines, replies still going out).
//
// A handler that must wait for something itself (ensembled serve asking a run's supervisor)
// takes a ticket with Defer() and answers later with Reply(ticket, reply); until then the
// connection waits, up to kControlDeferredMs (then an error reply), and nothing else does.
//
// A stale socket file from a crashed daemon is replaced. Single-threaded; Serve() is not
// re-entered (a handler that calls it again returns at once).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/status.h"
#include "common/ipc/control_protocol.h"

namespace ens {

// The bounds of a ControlSocket (the defaults below; tests pass smaller ones).
inline constexpr int kControlDeadlineMs = 2000;
inline constexpr int kControlMaxConnections = 64;
// Above the ~20 silent connections a busy user's scripts may hold, under the total: one uid
// cannot take every slot from the others.
inline constexpr int kControlMaxPerUid = 32;
inline constexpr int kControlAcceptsPerServe = 128;
inline constexpr int kControlLogEveryMs = 10000;
inline constexpr int kControlDeferredMs = 30000;

struct ControlLimits {
  int deadline_ms = kControlDeadlineMs;           // Default: 2000
  int max_connections = kControlMaxConnections;   // open at once, all peers. Default: 64
  int max_per_uid = kControlMaxPerUid;            // open at once, one peer uid. Default: 32
};

// Who is on the other end of a connection, from the kernel (SO_PEERCRED): it cannot be forged.
struct ControlPeer {
  uid_t uid = static_cast<uid_t>(-1);
  gid_t gid = static_cast<gid_t>(-1);
  pid_t pid = 0;
};

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  using PeerHandler = std::function<nlohmann::json(const nlohmann::json& request, const ControlPeer& peer)>;
  explicit ControlSocket(ControlLimits limits = {}) : limits_(limits) {}
  ControlSocket(const ControlSocket&) = delete;
  ControlSocket& operator=(const ControlSocket&) = delete;
  ~ControlSocket();  // closes the open connections, unlinks the socket file
  // `mode`: the socket file's permissions (0660: the daemon's group may connect). Default: 0600
  Status Listen(const std::string& path, mode_t mode = 0600);
  // The listening socket (-1 before Listen()).
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Does what can be done now (see above) and returns; never waits on a client.
  void Serve(const Handler& handler);
  // The same, telling the handler who asked (ensembled serve: only a run's submitter or root
  // may cancel it).
  void ServeWithPeer(const PeerHandler& handler);
  // The fds to poll for POLLIN: the listening socket and each connection still being read.
  std::vector<int> PollFds() const;
  // Milliseconds until Serve() has work that no fd announces (a deadline, a reply not all
  // written): 0 when due, -1 when no connection is open.
  int NextWakeMs() const;
  size_t open_connections() const { return conns_.size(); }
  // Inside a handler only: the request is answered later, by Reply(ticket, ...); what the
  // handler returns is then ignored.
  uint64_t Defer();
  // Answers a deferred request (a ticket whose connection is gone: nothing).
  void Reply(uint64_t ticket, nlohmann::json reply);

 private:
  using Clock = std::chrono::steady_clock;
  struct Connection {
    int fd = -1;
    ControlPeer peer;
    Clock::time_point deadline;  // reading: the whole request; writing: the reply taken
    std::string in;
    std::string out;             // the reply; non-empty once answered
    size_t written = 0;
    bool done = false;           // to close
    uint64_t ticket = 0;         // non-zero: deferred, waiting for Reply()
  };
  void Accept(Clock::time_point now);
  void Read(Connection& c, const PeerHandler& handler);
  void Answer(Connection& c, nlohmann::json reply);
  void Write(Connection& c);
  void Expire(Connection& c, Clock::time_point now);
  void LogTrouble(Clock::time_point now);

  ControlLimits limits_;
  int fd_ = -1;
  std::string path_;
  std::vector<Connection> conns_;
  bool serving_ = false;
  Connection* handling_ = nullptr;  // the connection whose handler runs (Defer)
  uint64_t last_ticket_ = 0;
  // Counted since the last log line (LogTrouble).
  int refused_ = 0, dropped_ = 0;
  Clock::time_point last_log_{};
};

}  // namespace ens
