// The control client: what ensemblectl (and `ensembled serve`, asking a run's supervisor) uses
// to send one request of the control protocol (control_protocol.h) to a daemon's Unix socket and
// read its one reply, and where a run's control socket is. The server side is
// orchestrator/service/control_socket.h. Errors name the socket path. Thread-compatible.
#pragma once

#include <sys/un.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace ens {

// Fills `addr` for the Unix socket at `path`; false when the path is too long for one.
bool UnixSocketAddress(const std::string& path, sockaddr_un* addr);

// One request, one reply. Errors name the socket path.
StatusOr<nlohmann::json> ControlRequest(const std::string& path, const nlohmann::json& request,
                                        int timeout_ms = 5000);

// The same without blocking, for a daemon's loop (ensembled serve asking a run's supervisor):
// the constructor connects and sends (a Unix socket connects at once, or fails); the loop
// polls fd() for POLLIN, calls Poll() when it is ready and at the latest NextWakeMs() from now;
// Poll() returns true once the call is over, with result() set: the reply, or an error that
// names the socket path (no reply within timeout_ms included).
class ControlCall {
 public:
  // `named`: the socket as errors name it ("" the path; a /proc/self/fd/N path is named by
  // what it was opened as).
  ControlCall(const std::string& path, const nlohmann::json& request, int timeout_ms, const std::string& named = "");
  ControlCall(const ControlCall&) = delete;
  ControlCall& operator=(const ControlCall&) = delete;
  ~ControlCall();
  int fd() const { return fd_; }  // -1 once over
  bool Poll();
  int NextWakeMs() const;
  const StatusOr<nlohmann::json>& result() const { return result_; }

 private:
  void Finish(StatusOr<nlohmann::json> result);
  std::string path_;
  int fd_ = -1;
  std::chrono::steady_clock::time_point deadline_;
  int timeout_ms_;
  std::string in_;
  StatusOr<nlohmann::json> result_ = Status::Timeout("not over");
};

// Where the control socket of a run lives (config service.control_socket or its default).
std::string ControlSocketPath(const std::string& configured, const std::string& run_name,
                              const std::string& state_dir);
// The control socket of the run in `state_dir`: the one its status.json names (the path the
// running supervisor listens on), else <state_dir>/control.sock.
std::string RunControlSocket(const std::string& state_dir);

}  // namespace ens
