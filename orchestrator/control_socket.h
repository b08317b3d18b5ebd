// ControlSocket: the daemon's Unix socket for ensemblectl (mode 0600).
//
// Protocol: the client connects, sends one JSON object on one line
// ({"cmd": "status" | "stop" | "pause" | "resume" | "reload"}), reads one JSON line back
// ({"ok": bool, ...}) and the connection closes. The daemon serves it from its main loop:
// Serve() handles every pending connection with a short per-client deadline, so a stuck
// client cannot stall training. A stale socket file from a crashed daemon is replaced.
// Single-threaded.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ens {

class ControlSocket {
 public:
  using Handler = std::function<nlohmann::json(const nlohmann::json& request)>;
  ~ControlSocket();
  Status Listen(const std::string& path);
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Accepts and answers every pending client.
  void Serve(const Handler& handler);

 private:
  int fd_ = -1;
  std::string path_;
};

// Client side (ensemblectl): one request, one reply. Errors name the socket path.
StatusOr<nlohmann::json> ControlRequest(const std::string& path, const nlohmann::json& request,
                                        int timeout_ms = 5000);

// Where the control socket of a run lives (config service.control_socket or its default).
std::string ControlSocketPath(const std::string& configured, const std::string& run_name,
                              const std::string& state_dir);

}  // namespace ens
