// libFuzzer target: the control protocol's server side (orchestrator/service/control_socket.h) on
// arbitrary bytes, through a real ControlSocket.
//
// Each input is what one client sends before it shuts its side. ControlSocket::Serve() must
// answer it with exactly one line, a JSON object with a boolean "ok", and close the
// connection: {"ok": true} echoing the request when the first line is a JSON object with a
// string "cmd", {"ok": false, "error": ...} otherwise, and also when the handler throws over
// a field of the wrong type (the handler reads "run" as a string, as ensembled serve's does).
// The socket lives at /tmp/ens-fuzz-<pid>.sock for the whole run.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "orchestrator/service/control_socket.h"

namespace {

using json = nlohmann::json;

json Handle(const json& req) { return {{"ok", true}, {"cmd", req["cmd"]}, {"run", req.value("run", std::string())}}; }

ens::ControlSocket& Socket() {
  static ens::ControlSocket sock;  // closed and unlinked at exit
  static const bool listening = sock.Listen("/tmp/ens-fuzz-" + std::to_string(::getpid()) + ".sock").ok();
  if (!listening) __builtin_trap();
  return sock;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ens::ControlSocket& sock = Socket();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.path().c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) __builtin_trap();
  // Inputs are far smaller than a socket buffer: one send takes them whole.
  if (size > 0 && ::send(fd, data, size, MSG_NOSIGNAL) != static_cast<ssize_t>(size)) __builtin_trap();
  ::shutdown(fd, SHUT_WR);
  for (int i = 0; i < 1000 && (i == 0 || sock.open_connections() > 0); ++i) sock.Serve(Handle);
  if (sock.open_connections() != 0) __builtin_trap();  // a whole request is answered at once
  std::string reply;
  char buf[4096];
  for (;;) {
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) <= 0) __builtin_trap();
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0) __builtin_trap();
    if (n == 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (reply.empty() || reply.back() != '\n' || reply.find('\n') != reply.size() - 1) __builtin_trap();
  json j = json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) __builtin_trap();
  // What the server should have made of the first line.
  const std::string text(reinterpret_cast<const char*>(data), size);
  json req = json::parse(text.substr(0, text.find('\n')), nullptr, false);
  bool valid = !req.is_discarded() && req.is_object() && req.contains("cmd") && req["cmd"].is_string() &&
               (!req.contains("run") || req["run"].is_string());
  if (j["ok"].get<bool>() != valid) __builtin_trap();
  if (valid && j["cmd"] != req["cmd"]) __builtin_trap();
  if (!valid && (!j.contains("error") || !j["error"].is_string())) __builtin_trap();
  return 0;
}
