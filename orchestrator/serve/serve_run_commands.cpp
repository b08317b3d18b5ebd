// ServeDaemon's control commands (common/ipc/control_protocol.h): its handlers of the queue's
// commands (list, submit, cancel), and the commands on one run by name (README "Serving many
// runs"): what `ensemblectl status|pause|resume|stop|reload|predict|verify|export --socket S
// NAME` sends as {"cmd": "run", "run": NAME, "action": ...}.
//
// locate and status: anyone who may connect (run_as "submitter": the run's submitter or root).
// pause, resume, stop, reload: the run's submitter or root, checked here with the socket's
// SO_PEERCRED uid; a run's own control socket is 0600 (the daemon's user; run_as "submitter":
// in the submitter's state directory), so this is the only way in for the rest of the group.
// pause, resume and any other
// run command without a handler here are passed on to the run's supervisor; stop is cancel (a graceful stop; the run is `cancelled`,
// its state kept); reload re-reads the run's file in runs_dir, writes its effective config anew
// and asks the supervisor to reload it (its answer says what applies when), restoring the old
// effective config when the supervisor refuses. The daemon's loop never waits for a
// supervisor's answer (AskRun: the client's reply is deferred until it comes, or 4 s pass).
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/base/atomic_file.h"
#include "common/base/no_follow.h"
#include "common/state/run_layout.h"
#include "orchestrator/serve/serve_daemon.h"
#include "orchestrator/serve/serve_layout.h"
#include "common/ipc/control_protocol.h"

namespace ens {
namespace {

using json = nlohmann::json;

// How long the daemon waits for a run's supervisor to answer (it answers from its own loop,
// within a second or so); its loop goes on meanwhile (AskRun). Under ensemblectl's own 5 s, so
// the client is told which run did not answer rather than timing out itself.
constexpr int kRunReplyMs = 4000;

std::string Text(const json& req, const char* key) {
  return req.contains(key) && req[key].is_string() ? req[key].get<std::string>() : "";
}

json Refused(const std::string& why) { return ControlRefused(why); }

json ErrorList(const std::vector<ConfigError>& errors) {
  json list = json::array();
  for (const ConfigError& e : errors) list.push_back({{"pointer", e.pointer}, {"message", e.message}});
  return list;
}

}  // namespace

std::string ServeDaemon::NotPermitted(const ServedRun& run, const ControlPeer& peer, const std::string& verb) const {
  if (peer.uid == 0 || peer.uid == run.submitter) return "";
  return "run '" + run.name + "' was submitted by uid " + std::to_string(run.submitter) + "; only that user or root may " +
         verb + " it";
}

json ServeDaemon::CancelFor(ServedRun& run, const ControlPeer& peer, const std::string& verb) {
  if (std::string why = NotPermitted(run, peer, verb); !why.empty()) return Refused(why);
  if (!run.file.empty()) {
    ::unlink(run.file.c_str());
    run.file.clear();
  }
  Cancel(run, "cancelled by uid " + std::to_string(peer.uid) + " (ensemblectl " + verb + ")");
  return ControlOk(std::string(run.state == RunState::kStopping ? "stopping" : "cancelled") + " run " + run.name +
                   " (its state is kept)");
}

const std::vector<ServeDaemon::ServeCommandHandler>& ServeDaemon::ServeCommandHandlers() {
  using Peer = const ControlPeer&;
  static const std::vector<ServeCommandHandler> handlers = {
      {ControlCommand::kList, kQueueScope, [](ServeDaemon& d, const json&, Peer, ServedRun*) { return d.List(); }},
      {ControlCommand::kSubmit, kQueueScope,
       [](ServeDaemon& d, const json& req, Peer peer, ServedRun*) { return d.Submit(req, peer); }},
      {ControlCommand::kCancel, kQueueScope,
       [](ServeDaemon& d, const json& req, Peer peer, ServedRun*) {
         ServedRun* run = d.FindRun(Text(req, "run"));
         if (run == nullptr || IsEnded(run->state)) return Refused("no queued or running run named '" + Text(req, "run") + "'");
         return d.CancelFor(*run, peer, "cancel");
       }},
      {ControlCommand::kLocate, kServedRunScope,
       [](ServeDaemon& d, const json&, Peer, ServedRun* run) { return ControlOkWith({{"run", d.Describe(*run)}}); }},
      {ControlCommand::kStatus, kServedRunScope,
       [](ServeDaemon& d, const json&, Peer, ServedRun* run) {
         json reply = ControlOkWith({{"run", d.Describe(*run)}, {"live", nullptr}});
         if (run->state != RunState::kRunning && run->state != RunState::kStopping) return reply;
         return d.AskRun(*run, "status", [reply](StatusOr<json> live) mutable {
           if (live.ok() && live->value("ok", false) && live->contains("status")) reply["live"] = (*live)["status"];
           return reply;
         });
       }},
      {ControlCommand::kStop, kServedRunScope,  // a graceful stop of a served run is its cancel
       [](ServeDaemon& d, const json&, Peer peer, ServedRun* run) {
         if (std::string why = d.EndedRefusal(*run, "stop"); !why.empty()) return Refused(why);
         return d.CancelFor(*run, peer, "stop");
       }},
      {ControlCommand::kReload, kServedRunScope,  // the daemon holds the run's config file
       [](ServeDaemon& d, const json&, Peer, ServedRun* run) {
         if (std::string why = d.EndedRefusal(*run, "reload"); !why.empty()) return Refused(why);
         return d.ReloadRun(*run);
       }},
  };
  return handlers;
}

const ServeDaemon::ServeCommandHandler* ServeDaemon::HandlerOf(ControlCommand c, unsigned scope) {
  for (const ServeCommandHandler& h : ServeCommandHandlers())
    if (h.command == c && h.scope == scope) return &h;
  return nullptr;
}

bool ServeDaemon::Serves(ControlCommand c, unsigned scope) {
  if (HandlerOf(c, scope) != nullptr) return true;
  // A served run's command without a handler of the daemon's is passed to the run's supervisor.
  return scope == kServedRunScope && (InfoOf(c).scope & kRunScope) != 0 && (InfoOf(c).scope & kServedRunScope) != 0;
}

std::string ServeDaemon::EndedRefusal(const ServedRun& run, const std::string& action) const {
  if (!IsEnded(run.state)) return "";
  return "run '" + run.name + "' is " + RunStateName(run.state) + ": nothing to " + action;
}

json ServeDaemon::RunCommand(const json& req, const ControlPeer& peer) {
  const std::string name = Text(req, "run"), action = Text(req, "action");
  ServedRun* run = FindRun(name);
  if (run == nullptr) {
    for (auto& [file, r] : rejected_)
      if (r.name == name) return Refused("run '" + name + "' was rejected: " + r.reason);
    return Refused("no run named '" + name + "' (ensemblectl list shows every run)");
  }
  ParsedCommand parsed = CommandOf(req, kServedRunScope, "action", "action");
  if (!parsed.command) return parsed.refusal;
  const ControlCommand command = *parsed.command;
  // A kSubmitter command is the run's submitter's; under run_as "submitter" every command is
  // (a run's state is its submitter's to read; list still names every run).
  if (InfoOf(command).access == CommandAccess::kSubmitter || run_as_.submitter) {
    if (std::string why = NotPermitted(*run, peer, action); !why.empty()) return Refused(why);
  }
  if (const ServeCommandHandler* h = HandlerOf(command, kServedRunScope)) return h->handle(*this, req, peer, run);
  // Any other run command: passed to the run's supervisor.
  if (std::string why = EndedRefusal(*run, action); !why.empty()) return Refused(why);
  if (run->state != RunState::kRunning)
    return Refused("run '" + name + "' is " + RunStateName(run->state) + "; " + action +
                   " applies to a running run (cancel takes a queued one off the queue)");
  return AskRun(*run, action, [name, action, uid = peer.uid](StatusOr<json> reply) {
    if (!reply.ok()) return Refused("run '" + name + "' did not answer: " + reply.status().message());
    spdlog::info("run {}: {} by uid {}: {}", name, action, uid, reply->dump());
    return *reply;
  });
}

json ServeDaemon::AskRun(const ServedRun& run, const std::string& cmd, RunReplyFinish finish) {
  // The run's socket as its status.json names it (else <state_dir>/control.sock), both reached
  // without following a link and checked to be the run's own (RunFiles): a run cannot point the
  // daemon at another's socket, nor at the daemon's.
  const FileCheck mine = RunFiles(run);
  std::string socket = RunLayout(run.state_dir).ControlSocket();
  if (auto status = ReadNoFollow(RunLayout(run.state_dir).StatusFile(), mine); status.ok()) {
    json j = json::parse(*status, nullptr, false);
    if (j.is_object() && j.contains("control_socket") && j["control_socket"].is_string())
      socket = j["control_socket"].get<std::string>();
  }
  StatusOr<int> inode = OpenSocketNoFollow(socket, mine);
  if (!inode.ok()) return finish(Status::IOError("its control socket: " + inode.status().message()));
  auto call = std::make_unique<ControlCall>(ProcFdPath(*inode), json{{"cmd", cmd}}, kRunReplyMs, socket);
  ::close(*inode);  // connected (or over) by now
  if (call->fd() < 0) return finish(call->result());  // over at once (no socket, say)
  uint64_t ticket = control_.Defer();
  if (ticket == 0) return finish(Status::Internal("AskRun outside a control handler"));
  run_calls_.push_back({std::move(call), ticket, std::move(finish)});
  return json();  // not sent: the client's answer is finish()'s
}

void ServeDaemon::PollRunCalls() {
  for (auto it = run_calls_.begin(); it != run_calls_.end();) {
    if (!it->call->Poll()) {
      ++it;
      continue;
    }
    control_.Reply(it->ticket, it->finish(it->call->result()));
    it = run_calls_.erase(it);
  }
}

json ServeDaemon::ReloadRun(ServedRun& run) {
  if (run.file.empty()) return Refused("run '" + run.name + "' has no config file in " + cfg_.runs_dir + " any more");
  // Read through no link; the file must still be the submitter's (a dropped file) or the
  // daemon's (written by submit): nobody else's text becomes the run's.
  uid_t owner = 0;
  auto text = ReadNoFollow(run.file, {std::nullopt, uint64_t{1} << 20}, &owner);
  if (!text.ok()) return Refused(text.status().message());
  if (owner != run.submitter && owner != ::geteuid())
    return Refused(run.file + ": belongs to uid " + std::to_string(owner) + ", neither the run's submitter (uid " +
                   std::to_string(run.submitter) + ") nor the daemon");
  Config cfg;
  std::vector<ConfigError> errors = ValidateServedRunConfig(*text, ParentDir(run.file), cfg_.state_root, &cfg);
  if (errors.empty() && cfg.run_name != run.name)
    errors.push_back({"/run_name", "a served run's name cannot change (it is '" + run.name + "')"});
  if (errors.empty() && PlainPath(cfg.state_dir) != PlainPath(run.state_dir))
    errors.push_back({"/state_dir", "a served run's state directory cannot change (it is " + run.state_dir + ")"});
  if (errors.empty()) {
    StatusOr<RunAsk> ask = queue_->pool().AskOf(cfg.resources);
    if (!ask.ok())
      errors.push_back({"/resources", ask.status().message()});
    else if (DescribeGrant(*ask) != DescribeGrant(run.ask))
      errors.push_back({"/resources", "a served run's resources cannot change by reload (it asks " +
                                          DescribeGrant(run.ask) + "): cancel it and submit it again"});
  }
  if (!errors.empty()) {
    json r = Refused(run.file + ": " + (errors[0].pointer.empty() ? "/" : errors[0].pointer) + ": " + errors[0].message);
    r["errors"] = ErrorList(errors);
    return r;
  }
  StatusOr<std::string> effective = EffectiveConfigText(cfg);
  if (!effective.ok()) return Refused(effective.status().ToString());
  auto before = ReadFile(run.config_file);
  struct stat was;  // run_as "submitter": shared with the submitter's group, as the file it replaces
  const gid_t gid = ::stat(run.config_file.c_str(), &was) == 0 ? was.st_gid : ::getegid();
  if (Status s = WriteFileAtomic(run.config_file, *effective); !s.ok()) return Refused(s.ToString());
  if (Status s = ShareWithSubmitter(run.config_file, gid); !s.ok()) return Refused(s.ToString());
  if (run.state != RunState::kRunning) {
    run.rounds = cfg.rounds.count;
    run.members = static_cast<int>(cfg.members.size());
    return ControlOk("run " + run.name + " is " + RunStateName(run.state) +
                     ": it starts with the new config (its resume checks it as reload would)");
  }
  return AskRun(run, "reload", [this, name = run.name, file = run.file, config_file = run.config_file, gid,
                                 before = before.ok() ? std::optional<std::string>(*before) : std::nullopt,
                                 rounds = cfg.rounds.count, members = static_cast<int>(cfg.members.size())](
                                    StatusOr<json> reply) {
    if (!reply.ok() || !reply->value("ok", false)) {
      if (before) {
        Status s = WriteFileAtomic(config_file, *before);
        if (s.ok()) s = ShareWithSubmitter(config_file, gid);
        if (!s.ok()) spdlog::error("run {}: {}", name, s.ToString());
      }
      return reply.ok() ? *reply : Refused("run '" + name + "' did not answer: " + reply.status().message());
    }
    if (ServedRun* r = FindRun(name)) {
      r->rounds = rounds;
      r->members = members;
    }
    spdlog::info("run {}: reloaded {}: {}", name, file, reply->value("message", ""));
    return *reply;
  });
}

}  // namespace ens
