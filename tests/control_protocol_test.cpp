// Tests of common/ipc/control_protocol.h: one table of commands, the scope each is
// served in, and the replies.
#include "common/ipc/control_protocol.h"

#include <catch2/catch.hpp>

#include <set>

#include "orchestrator/run/supervisor.h"
#include "orchestrator/serve/serve_daemon.h"

namespace ens {
namespace {

using json = nlohmann::json;

TEST_CASE("every command has one row with a unique name that parses back", "[control][protocol]") {
  std::set<std::string> names;
  for (const ControlCommandInfo& i : kControlCommands) {
    INFO(i.name);
    CHECK(names.insert(i.name).second);
    CHECK(ParseControlCommand(i.name) == i.command);
    CHECK(std::string(InfoOf(i.command).name) == i.name);
    CHECK(i.scope != 0);
  }
  CHECK_FALSE(ParseControlCommand("statuz").has_value());
  CHECK(CommandNames(kRunScope) == "status, stop, pause, resume, reload");
  CHECK(CommandNames(kServedRunScope) == "status, stop, pause, resume, reload, locate");
  CHECK(CommandNames(kQueueScope) == "submit, list, cancel");
}

TEST_CASE("a command outside its scope, unknown or missing is refused with the names that are", "[control][protocol]") {
  ParsedCommand ok = CommandOf({{"cmd", "pause"}}, kRunScope);
  CHECK(ok.command == ControlCommand::kPause);
  ParsedCommand serve_only = CommandOf({{"cmd", "submit"}}, kRunScope);
  CHECK_FALSE(serve_only.command.has_value());
  CHECK(serve_only.refusal == json{{"ok", false}, {"error", "unknown command 'submit' (status, stop, pause, resume, reload)"}});
  ParsedCommand missing = CommandOf({{"run", "x"}}, kServedRunScope, "action", "action");
  CHECK_FALSE(missing.command.has_value());
  CHECK_THAT(missing.refusal["error"].get<std::string>(), Catch::StartsWith("unknown action '' ("));
  ParsedCommand wrong_type = CommandOf({{"cmd", 5}}, kRunScope);
  CHECK_FALSE(wrong_type.command.has_value());
}

TEST_CASE("each server serves exactly the commands of its scope, and nothing falls to another's code",
          "[control][protocol]") {
  for (const ControlCommandInfo& i : kControlCommands) {
    INFO(i.name);
    CHECK(Supervisor::Serves(i.command) == ((i.scope & kRunScope) != 0));
    CHECK(ServeDaemon::Serves(i.command, kQueueScope) == ((i.scope & kQueueScope) != 0));
    CHECK(ServeDaemon::Serves(i.command, kServedRunScope) == ((i.scope & kServedRunScope) != 0));
    // ensemblectl: a kAction row needs a run to ask; a command nothing serves has no subcommand.
    if (i.ctl == CtlForm::kAction) CHECK((i.scope & kRunScope) != 0);
  }
}

TEST_CASE("replies: ok with a message or data, refused with an error, extra fields kept", "[control][protocol]") {
  CHECK(ControlOk("resumed") == json{{"ok", true}, {"message", "resumed"}});
  CHECK(ControlOk("submitted", {{"run", "a"}}) == json{{"ok", true}, {"message", "submitted"}, {"run", "a"}});
  CHECK(ControlOkWith({{"runs", json::array()}}) == json{{"ok", true}, {"runs", json::array()}});
  CHECK(ControlRefused("no") == json{{"ok", false}, {"error", "no"}});
  CHECK(ControlRefused("no", {{"refused", {"/a"}}}) == json{{"ok", false}, {"error", "no"}, {"refused", {"/a"}}});
}

}  // namespace
}  // namespace ens
