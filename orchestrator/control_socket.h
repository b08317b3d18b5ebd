// ControlSocket: the daemon's Unix socket for ensemblectl (mode 0600 unless asked otherwise).
//
// Protocol: the client connects, sends one JSON object on one line
// ({"cmd": "status" | "stop" | "pause" | "resume" | "reload"}), reads one JSON line back
// ({"ok": bool, ...}) and the connection closes. The daemon serves it from its main loop:
// Serve() handles every pending connection with a short per-client deadline, so a stuck
// client cannot stall training. A stale socket file from a crashed daemon is replaced.
// Single-threaded.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace ens {

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
  ~ControlSocket();
  // `mode`: the socket file's permissions (0660: the daemon's group may connect). Default: 0600
  Status Listen(const std::string& path, mode_t mode = 0600);
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Accepts and answers every pending client.
  void Serve(const Handler& handler);
  // The same, telling the handler who asked (ensembled serve: only a run's submitter or root
  // may cancel it).
  void ServeWithPeer(const PeerHandler& handler);

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
// The control socket of the run in `state_dir`: the one its status.json names (the path the
// running supervisor listens on), else <state_dir>/control.sock.
std::string RunControlSocket(const std::string& state_dir);

}  // namespace ens
