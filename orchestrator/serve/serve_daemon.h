// ServeDaemon: `ensembled serve`, one daemon that runs many runs (README "Serving many runs",
// ARCHITECTURE.md "Serve").
//
// Every *.json in runs_dir is a run config. The daemon validates it as `ensembled run` would (a
// bad one is `rejected` with every error and the daemon goes on), queues it (RunQueue: state
// table, grants, order), and runs it as a child `ensembled run --config <effective config>`
// with CUDA_VISIBLE_DEVICES set to its grant ("" for a CPU run), in a process group of its own,
// with PR_SET_PDEATHSIG (common/base/subprocess.h): a crash of one run touches no other, and a
// daemon killed with SIGKILL leaves no run behind. A run's stdout and stderr go into a pipe the
// daemon reads in its loop (RunLogRelay): appended to <state_dir>/serve.log, and each line to
// the daemon's own log as "[run NAME] <line>"; the pipe is drained before a run's exit is acted
// on. The queue is journaled (serve_journal.h); on start the daemon resumes
// every run that was running (each from its own journal) and keeps the queue's order.
//
// Events, all taken in one poll(): a signalfd (SIGTERM/SIGINT: stop the runs gracefully and
// exit; a second: SIGKILL them; SIGCHLD: a run ended: reaped, and the runs it made room for
// started, in the same wake-up; SIGHUP: re-read runs_dir), each run's output pipe, an inotify
// watch on runs_dir (a file added, changed or removed), the control socket and its open
// connections (ensemblectl submit, list, cancel and the per-run commands; served without
// waiting on any client, ControlSocket) and a timeout of at most 5 s (a crashed run's restart
// time, the watchdog, a control connection's deadline).
// Idle, it sleeps in that poll. Under systemd it says READY=1 once it listens, STATUS= with
// its runs, and pings the watchdog from that loop (whose timeout is then at most WatchdogSec/2).
// With run_as "submitter" (orchestrator/serve/run_as.h, serve_run_as.cpp) each run runs as the uid
// that submitted it, in a state directory that uid owns; see docs/run-as.md.
// Single-threaded.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/config.h"
#include "common/config/served_run_config.h"
#include "common/state/journal.h"
#include "common/state/journal_follower.h"
#include "common/base/status.h"
#include "common/base/subprocess.h"
#include "common/ipc/control_client.h"
#include "common/ipc/control_protocol.h"
#include "orchestrator/service/control_socket.h"
#include "orchestrator/serve/run_as.h"
#include "orchestrator/serve/run_log_relay.h"
#include "orchestrator/serve/run_queue.h"
#include "orchestrator/serve/serve_config.h"
#include "orchestrator/serve/serve_http.h"
#include "orchestrator/service/systemd_notifier.h"

namespace ens {

struct ServeOptions {
  std::string ensembled;  // the binary each run executes (`ensembled run`)
  int signal_fd = -1;     // SIGTERM, SIGINT, SIGHUP and SIGCHLD, blocked and read here
};

// A crashed run is restarted at most this many times in a row; then it is `failed`.
inline constexpr int kRunRestartBudget = 5;
// A run that ran this long before it crashed starts a new count of crashes in a row.
inline constexpr double kRunHealthySeconds = 600;

// The config file a served run's `ensembled run` reads: the normalised config (ConfigToJson:
// every path absolute, state_dir set) less its unset values (null, ""), which the reader would
// refuse. Reading it back gives the same normalised config (the run's config fingerprint), and
// so the same run. Internal when it would not read back (a bug, named).
StatusOr<std::string> EffectiveConfigText(const Config& cfg);

// run_as "submitter": `dir` (runs_dir), which the submitters' group may write, is sticky (made
// so when the daemon owns it): nobody renames, replaces or removes another's file there.
// InvalidArgument naming /runs_dir when it is writable by others, not sticky and not the daemon's.
Status KeepDropDirSticky(const std::string& dir);

class ServeDaemon {
 public:
  // Whether the daemon serves control command `c` in `scope` (kQueueScope: itself;
  // kServedRunScope: on one run, by a handler of its own or passed to the run).
  static bool Serves(ControlCommand c, unsigned scope);
  ServeDaemon(ServeConfig cfg, ServeOptions opts);
  ~ServeDaemon();
  // Runs until stopped; the exit code (common/base/exit_codes.h).
  int Run();

 private:
  Status Start();
  Status ResumeFromJournal();
  void ScanRunsDir();
  // Validates the text of `file` (a config of runs_dir, read once: `submitter` is the uid
  // that owns it, or submitted it) and queues its run (journaled), or records it as rejected
  // (nullptr).
  ServedRun* AdmitFile(const std::string& file, const std::string& text, uid_t submitter, int priority);
  // Errors of a valid config that this daemon cannot take: a duplicate run_name or state
  // directory, an ask the machine can never meet.
  std::vector<ConfigError> Admissible(const Config& cfg);
  void Reject(const std::string& file, const std::string& name, std::vector<ConfigError> errors);
  void StartRuns();
  void StartRun(ServedRun& run);
  // Preemption (cfg_.preemption): the first queued run in start order that PreemptFor finds
  // victims for has them stopped (preempting: SIGTERM, killed after grace_s).
  void PreemptForWaitingRun(const std::vector<ServedRun*>& runs);
  void KillOverduePreempted();
  // A preempting run's child is gone: back to the queue (journaled), or ended if it ended.
  void PreemptedRunEnded(ServedRun& run, const ExitInfo& exit);
  void ReapChildren();
  // Reads what the runs' pipes hold (`name`: that run's only; "" every run's). `at_exit`: the
  // child has exited: read all of it and hand over a last line without its newline.
  void PumpLogs(const std::string& name, bool at_exit);
  void RunEnded(ServedRun& run, const ExitInfo& exit);
  void Cancel(ServedRun& run, const std::string& why);
  void End(ServedRun& run, RunState to, const std::string& reason);
  void HandleSignals();
  // systemd's STATUS=: "2 running, 1 queued; 3 finished, 0 failed, 1 cancelled; 1 rejected".
  std::string QueueStatus() const;
  // A control request: a queue command's handler, a run's command (RunCommand), or refused by
  // its scope.
  nlohmann::json Handle(const nlohmann::json& req, const ControlPeer& peer);
  // What the daemon does itself with a command of `scope` (kQueueScope, or kServedRunScope:
  // on one run, `run` set). A served run's command without a row here is passed to the run.
  struct ServeCommandHandler {
    ControlCommand command;
    unsigned scope;
    nlohmann::json (*handle)(ServeDaemon& daemon, const nlohmann::json& req, const ControlPeer& peer, ServedRun* run);
  };
  static const std::vector<ServeCommandHandler>& ServeCommandHandlers();
  static const ServeCommandHandler* HandlerOf(ControlCommand c, unsigned scope);
  nlohmann::json Submit(const nlohmann::json& req, const ControlPeer& peer);
  // A command on one run by name (orchestrator/serve/serve_run_commands.cpp): locate (its view and
  // state directory), status (with its supervisor's live view), stop (= cancel) and reload by
  // the daemon's own handlers; any other run command passed to the running run's supervisor;
  // a kSubmitter command only for the run's submitter or root.
  nlohmann::json RunCommand(const nlohmann::json& req, const ControlPeer& peer);
  // The refusal of `action` on a run that has ended ("" when it has not).
  std::string EndedRefusal(const ServedRun& run, const std::string& action) const;
  nlohmann::json CancelFor(ServedRun& run, const ControlPeer& peer, const std::string& verb);
  nlohmann::json ReloadRun(ServedRun& run);
  // Sends {"cmd": cmd} to the run's supervisor and answers the ensemblectl client with
  // finish(its reply or why none came) when it answers, within kRunReplyMs, from the loop
  // (ControlSocket::Defer): the loop never waits for a run. Inside a handler only.
  using RunReplyFinish = std::function<nlohmann::json(StatusOr<nlohmann::json> reply)>;
  nlohmann::json AskRun(const ServedRun& run, const std::string& cmd, RunReplyFinish finish);
  void PollRunCalls();  // answers the calls that are over
  // "" when `peer` may change the run (its submitter or root), else why not.
  std::string NotPermitted(const ServedRun& run, const ControlPeer& peer, const std::string& verb) const;
  // run_as (orchestrator/serve/serve_run_as.cpp). At start: "submitter" checks the capabilities and
  // the group and opens state_root and .serve to the submitters (search only); "daemon" drops
  // every capability of a daemon that is not root.
  Status PrepareRunAs();
  // Root, or a member of limits.admins_group: may ask priorities up to admin_max_priority.
  bool IsAdmin(uid_t uid) const;
  // "" when `uid` may submit, else why not (always "" with run_as "daemon").
  std::string RefuseSubmitter(uid_t uid) const;
  // Before a run starts as its submitter: its credentials, its state directory made and given
  // to it (mode state_dir_mode), its effective config readable by it.
  StatusOr<Submitter> PrepareSubmitterRun(const ServedRun& run);
  // What a run's own files (journal, status.json, control socket) must be when the daemon
  // reads them (common/base/no_follow.h): its submitter's under run_as "submitter", else the daemon's.
  FileCheck RunFiles(const ServedRun& run) const;
  // Where the run stands, from its journal (JournalFollower under RunFiles: read only what is new).
  const RunProgress* ProgressOf(const ServedRun& run) const;
  // The file a run's output is relayed into: <state_dir>/serve.log, or with run_as
  // "submitter" <state_root>/.serve/logs/<name>.log (the daemon's file, the submitter's group).
  std::string LogOf(const ServedRun& run) const;
  // run_as "submitter": `path` (the daemon's) readable by the submitter's primary group, 0640.
  Status ShareWithSubmitter(const std::string& path, gid_t gid) const;
  nlohmann::json List() const;
  nlohmann::json Describe(const ServedRun& run) const;
  ServedRun* FindRun(const std::string& name);
  ServedRun* RunOfFile(const std::string& file);
  // Why `state_dir` cannot be run `except`'s (another live run's, inside or around one, the
  // daemon's own folders, runs_dir); "" when it can.
  std::string StateDirConflict(const std::string& state_dir, const std::string& except) const;
  // StateDirConflict as the config's error (/state_dir), or none.
  std::vector<ConfigError> StateDirRules(const Config& cfg, const std::string& name) const;
  void Append(nlohmann::json record);
  double Now() const;

  ServeConfig cfg_;
  ServeOptions opts_;
  RunAsPolicy run_as_;  // from cfg_ by PrepareRunAs
  std::optional<gid_t> admins_gid_;  // limits.admins_group's
  std::unique_ptr<RunQueue> queue_;
  std::unique_ptr<Journal> journal_;
  ControlSocket control_;
  SystemdNotifier notifier_;
  Published<nlohmann::json> http_runs_{nlohmann::json::array()};  // what http_ shows (outlives it)
  std::unique_ptr<HttpEndpoint> http_;                              // service.http_port > 0
  int inotify_fd_ = -1;
  struct RunCall {
    std::unique_ptr<ControlCall> call;
    uint64_t ticket = 0;  // the ensemblectl client's (ControlSocket::Defer)
    RunReplyFinish finish;
  };
  std::vector<RunCall> run_calls_;  // AskRun's, not over yet
  double last_scan_ = 0;  // Now() at the loop's last re-read of runs_dir
  std::map<std::string, ServedRun> runs_;  // by name: accepted runs, ended ones included
  std::map<std::string, ServedRun> rejected_;  // by file: configs that were not accepted
  std::map<std::string, std::pair<int64_t, int64_t>> rejected_stamp_;  // file -> (mtime ns, size)
  std::map<std::string, Subprocess> children_;  // by run name
  std::map<std::string, double> started_at_;    // by run name: Now() at its start
  // By state_dir and owner: each run's journal as read so far, so that describing a run (every pass of
  // the loop, for the status page) reads only its new records.
  mutable std::map<std::string, JournalFollower> journals_;
  // (run name, its output's relay): one per started child, kept until its pipe ends (which a
  // program the run left behind may delay past the run's exit).
  std::vector<std::pair<std::string, std::unique_ptr<RunLogRelay>>> relays_;
  uint64_t next_seq_ = 1;
  int stop_signals_ = 0;  // SIGTERM/SIGINT received
};

}  // namespace ens
