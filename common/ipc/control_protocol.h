// ControlProtocol: the commands an `ensemblectl` sends over a control socket (control_socket.h),
// as one enum with one table, and the replies they get.
//
// A request is {"cmd": NAME, ...}. A run's supervisor (ensembled run) serves the commands whose
// scope has kRun; `ensembled serve` serves those with kServe, and a run's command by name as
// {"cmd": "run", "run": NAME, "action": NAME} (the same names). Who may send one to a served
// run: kAnyone (anyone who may connect: the daemon's group), or kSubmitter (the run's submitter
// or root; under run_as "submitter" status and locate are the submitter's too,
// orchestrator/serve/serve_run_commands.cpp). A reply is {"ok": true, ...} or
// {"ok": false, "error": why, ...}: build them with ControlOk and ControlRefused.
// Handlers dispatch with a switch over ControlCommand (-Werror=switch: a new command does not
// build until each server says what it does with it). A new command: its row here, its case in
// the server that serves it, and its CLI in ctl/ (ARCHITECTURE.md "How to add ...").
// Pure. Thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace ens {

// The longest request line a control socket takes (longer: an error reply), and the longest
// reply line a client reads.
inline constexpr size_t kControlMaxLine = size_t{1} << 20;

enum class ControlCommand { kStatus, kStop, kPause, kResume, kReload, kLocate, kSubmit, kList, kCancel };

// Where a command is served.
enum CommandScope : unsigned { kRunScope = 1, kServeScope = 2, kBothScopes = 3 };
// Who may send it to a served run.
enum class CommandAccess { kAnyone, kSubmitter };

struct ControlCommandInfo {
  ControlCommand command;
  const char* name;      // its name on the wire and on ensemblectl's command line
  unsigned scope;        // CommandScope bits
  CommandAccess access;  // under `ensembled serve`
  const char* what;      // what it does, for errors and help
};

inline constexpr ControlCommandInfo kControlCommands[] = {
    {ControlCommand::kStatus, "status", kBothScopes, CommandAccess::kAnyone, "the run's progress, workers and rounds"},
    {ControlCommand::kStop, "stop", kBothScopes, CommandAccess::kSubmitter, "a graceful stop; the state is kept"},
    {ControlCommand::kPause, "pause", kBothScopes, CommandAccess::kSubmitter, "no new members until resume"},
    {ControlCommand::kResume, "resume", kBothScopes, CommandAccess::kSubmitter, "start members again"},
    {ControlCommand::kReload, "reload", kBothScopes, CommandAccess::kSubmitter, "re-read the run's config"},
    {ControlCommand::kLocate, "locate", kServeScope, CommandAccess::kAnyone, "a served run's state directory"},
    {ControlCommand::kSubmit, "submit", kServeScope, CommandAccess::kAnyone, "queue a run config"},
    {ControlCommand::kList, "list", kServeScope, CommandAccess::kAnyone, "every run of the daemon"},
    {ControlCommand::kCancel, "cancel", kServeScope, CommandAccess::kSubmitter, "take a run off the queue or stop it"},
};

const ControlCommandInfo& InfoOf(ControlCommand c);
// The command named `name`; nullopt when there is none.
std::optional<ControlCommand> ParseControlCommand(std::string_view name);
// "status, stop, pause, resume, reload": the names served in `scope` (a CommandScope bit).
std::string CommandNames(unsigned scope);
// The command of a request's "cmd" (or, with `key`, another string field) served in `scope`,
// or the reply refusing it ("unknown command 'x' (status, stop, ...)"); `what` names the
// field in that reply ("command", "action").
struct ParsedCommand {
  std::optional<ControlCommand> command;
  nlohmann::json refusal;  // when command is nullopt
};
ParsedCommand CommandOf(const nlohmann::json& request, unsigned scope, const char* key = "cmd",
                        const char* what = "command");

// {"ok": true, "message": message}, with `fields` merged in.
nlohmann::json ControlOk(const std::string& message, nlohmann::json fields = nlohmann::json::object());
// {"ok": true} with `fields` (a reply that carries data, no message).
nlohmann::json ControlOkWith(nlohmann::json fields);
// {"ok": false, "error": why}, with `fields` merged in.
nlohmann::json ControlRefused(const std::string& why, nlohmann::json fields = nlohmann::json::object());

}  // namespace ens
