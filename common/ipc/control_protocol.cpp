#include "common/ipc/control_protocol.h"

namespace ens {

using json = nlohmann::json;

const ControlCommandInfo& InfoOf(ControlCommand c) {
  for (const ControlCommandInfo& i : kControlCommands)
    if (i.command == c) return i;
  return kControlCommands[0];  // not reached: every command has its row (control_protocol_test)
}

std::optional<ControlCommand> ParseControlCommand(std::string_view name) {
  for (const ControlCommandInfo& i : kControlCommands)
    if (name == i.name) return i.command;
  return std::nullopt;
}

std::string CommandNames(unsigned scope) {
  std::string out;
  for (const ControlCommandInfo& i : kControlCommands)
    if (i.scope & scope) out += (out.empty() ? "" : ", ") + std::string(i.name);
  return out;
}

ParsedCommand CommandOf(const json& request, unsigned scope, const char* key, const char* what) {
  const std::string name = request.contains(key) && request[key].is_string() ? request[key].get<std::string>() : "";
  std::optional<ControlCommand> c = ParseControlCommand(name);
  if (c && (InfoOf(*c).scope & scope)) return {c, nullptr};
  return {std::nullopt, ControlRefused("unknown " + std::string(what) + " '" + name + "' (" + CommandNames(scope) + ")")};
}

json ControlOk(const std::string& message, json fields) {
  json reply = {{"ok", true}, {"message", message}};
  reply.update(fields);
  return reply;
}

json ControlOkWith(json fields) {
  json reply = {{"ok", true}};
  reply.update(fields);
  return reply;
}

json ControlRefused(const std::string& why, json fields) {
  json reply = {{"ok", false}, {"error", why}};
  reply.update(fields);
  return reply;
}

}  // namespace ens
