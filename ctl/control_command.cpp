// ensemblectl stop | pause | resume | reload: one request over the daemon's control socket.
#include <iostream>

#include "common/base/atomic_file.h"
#include "common/base/exit_codes.h"
#include "common/state/run_layout.h"
#include "ctl/commands.h"
#include "common/ipc/control_client.h"

namespace ens::ctl {

std::string FindControlSocket(const std::string& state_dir, const std::string& socket) {
  return socket.empty() ? RunControlSocket(state_dir) : socket;
}

int Control(const std::string& state_dir, const std::string& socket, const std::string& cmd) {
  std::string path = FindControlSocket(state_dir, socket);
  auto reply = ControlRequest(path, {{"cmd", cmd}});
  if (!reply.ok()) {
    std::cerr << "ensemblectl " << cmd << ": " << reply.status().message() << "\n";
    return exit_code::kTransientFailure;
  }
  if (!reply->value("ok", false)) {
    std::cerr << "ensemblectl " << cmd << ": refused: " << reply->value("error", "?") << "\n";
    return exit_code::kPermanentFailure;
  }
  std::cout << reply->value("message", "ok") << "\n";
  return exit_code::kOk;
}

}  // namespace ens::ctl
