// ControlProtocol: the commands an `ensemblectl` sends over a control socket (the server:
// orchestrator/service/control_socket.h; the client: control_client.h), as one enum with one
// table, and the replies they get.
//
// A request is {"cmd": NAME, ...}. Where a command is served is its row's scope: kRunScope, a
// run's supervisor (`ensembled run`); kQueueScope, `ensembled serve` itself (its queue);
// kServedRunScope, `ensembled serve` on one of its runs by name, as
// {"cmd": "run", "run": NAME, "action": NAME}. A served run's command the daemon has no handler
// of its own for is passed to the run's supervisor when the run is running (the access rule
// below first), so a new run command is served under `ensembled serve` with no code there.
// Who may send one to a served run: kAnyone (anyone who may connect: the daemon's group), or
// kSubmitter (the run's submitter or root; under run_as "submitter" status and locate are the
// submitter's too, orchestrator/serve/serve_run_commands.cpp). `ensemblectl` builds its
// subcommands and their help from the rows (ctl/main.cpp; CtlForm). A reply is
// {"ok": true, ...} or {"ok": false, "error": why, ...}: build them with ControlOk and
// ControlRefused.
// Each server holds one handler per command of its scope (Supervisor::Serves,
// ServeDaemon::Serves; control_protocol_test checks them against the scopes here), and refuses
// every other command by its scope. A new command: its row here and its handler in the server
// that serves it (ARCHITECTURE.md "How to add ...").
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

// Where a command is served (bits).
enum CommandScope : unsigned {
  kRunScope = 1,        // by a run's supervisor
  kQueueScope = 2,      // by `ensembled serve` itself
  kServedRunScope = 4,  // by `ensembled serve` on one run, by name
  kAnyScope = 7,
};
// Who may send it to a served run.
enum class CommandAccess { kAnyone, kSubmitter };
// How ensemblectl offers it. kAction: `ensemblectl NAME (--state-dir DIR | RUN --socket SOCKET)`,
// built from the row alone: one request (to the run's socket, or as a served run's action) and
// the reply's message printed. kOwnCommand: a subcommand with code of its own in ctl/, its help
// the row's `what`. kNoCommand: not a subcommand (ctl asks it on the way to another).
enum class CtlForm { kAction, kOwnCommand, kNoCommand };

struct ControlCommandInfo {
  ControlCommand command;
  const char* name;      // its name on the wire and on ensemblectl's command line
  unsigned scope;        // CommandScope bits
  CommandAccess access;  // under `ensembled serve`
  CtlForm ctl;           // its ensemblectl subcommand
  const char* what;      // what it does: ensemblectl's help
};

inline constexpr unsigned kRunCommand = kRunScope | kServedRunScope;
inline constexpr ControlCommandInfo kControlCommands[] = {
    {ControlCommand::kStatus, "status", kRunCommand, CommandAccess::kAnyone, CtlForm::kOwnCommand,
     "where a run stands: run state, plus live workers when running"},
    {ControlCommand::kStop, "stop", kRunCommand, CommandAccess::kSubmitter, CtlForm::kAction,
     "graceful stop: no new tasks, running ones finish; the state is kept"},
    {ControlCommand::kPause, "pause", kRunCommand, CommandAccess::kSubmitter, CtlForm::kAction,
     "no new tasks until resume (running ones finish)"},
    {ControlCommand::kResume, "resume", kRunCommand, CommandAccess::kSubmitter, CtlForm::kAction,
     "dispatch again after pause"},
    {ControlCommand::kReload, "reload", kRunCommand, CommandAccess::kSubmitter, CtlForm::kAction,
     "re-read the config; safe changes apply at the next round boundary"},
    {ControlCommand::kLocate, "locate", kServedRunScope, CommandAccess::kAnyone, CtlForm::kNoCommand,
     "a served run's state directory"},
    {ControlCommand::kSubmit, "submit", kQueueScope, CommandAccess::kAnyone, CtlForm::kOwnCommand,
     "queue a run config on an `ensembled serve` daemon"},
    {ControlCommand::kList, "list", kQueueScope, CommandAccess::kAnyone, CtlForm::kOwnCommand,
     "every run of an `ensembled serve` daemon"},
    {ControlCommand::kCancel, "cancel", kQueueScope, CommandAccess::kSubmitter, CtlForm::kOwnCommand,
     "stop a queued or running run of an `ensembled serve` daemon"},
};

const ControlCommandInfo& InfoOf(ControlCommand c);
// The command named `name`; nullopt when there is none.
std::optional<ControlCommand> ParseControlCommand(std::string_view name);
// "status, stop, pause, resume, reload": the names served in `scope` (CommandScope bits).
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
