// ensemblectl's subcommands. Each returns an exit code from common/base/exit_codes.h and prints
// errors that name the file or place at fault.
#pragma once

#include <string>
#include <vector>

#include <optional>

#include <nlohmann/json.hpp>

#include "common/base/status.h"
#include "common/scoring/sigma_calibration.h"

namespace ens::ctl {

using ens::SigmaMap;

// Reads the run state (run.json, journal, summaries) and prints where the run stands; when
// the daemon runs, adds its live view (workers, progress, ETA) from the control socket.
// `served`: the answer of `ensembled serve` to a status of this run ({"run": its view in the
// queue, "live": its supervisor's status or null}); then the live view comes from it, the
// queue's view is shown too, and a run that has not started yet is shown from it alone.
int ShowStatus(const std::string& state_dir, const std::string& socket, bool as_json,
               const nlohmann::json* served = nullptr);
// stop | pause | resume | reload over the control socket.
int Control(const std::string& state_dir, const std::string& socket, const std::string& cmd);
// The control socket of a run: `socket` if given, else the one status.json names, else
// <state_dir>/control.sock.
std::string FindControlSocket(const std::string& state_dir, const std::string& socket);
// Ensemble mean and std per input row, from the members of `round` (-1: the latest committed).
// The std is the round's calibrated one (a classifier's probabilities temperature-scaled)
// unless `raw_sigma`: then the members' own spread (and mean probabilities).
int Predict(const std::string& state_dir, int round, const std::string& input_csv,
            const std::string& output_csv, bool raw_sigma = false);
// Retrains members of `round` (-1: latest committed) alone, each in a fresh worker process,
// and compares them bit for bit with the recorded ones. `member` non-empty: just that one;
// else `sample` > 0: that many, chosen repeatably; else all. Exit kVerifyMismatch on any difference.
int Verify(const std::string& state_dir, int round, const std::string& member, int sample);
// Writes one TorchScript module to `output` whose forward(x) returns (mean, std) over the
// members of `round` (-1: latest committed), via `ensemble-worker export`. The std is the
// round's calibrated one (its sigma maps built into the module) unless `raw_sigma`.
int Export(const std::string& state_dir, int round, const std::string& output, bool raw_sigma = false);
// Writes member `member` of `round` (-1: latest committed) as its own TorchScript module to
// `output` (forward(x) -> its predictions in target units), via `ensemble-worker member-module`:
// a member saved as its weights (weights.bin) gets its module built now.
int ExportMember(const std::string& state_dir, int round, const std::string& member, const std::string& output);
// `ensembled serve`'s queue, over its control socket (ctl/serve_commands.cpp). submit sends
// the file's text and folder (relative paths are resolved against it) with its priority.
int Submit(const std::string& socket, const std::string& file, int priority);
// Every run of the daemon: name, state, priority, GPUs or CPU workers, progress, reason (and a
// rejected config's errors); --json: {"runs": [...]}.
int ListRuns(const std::string& socket, bool as_json);
// Cancels a queued or running run (graceful stop; its state is kept). Only its submitter or root.
int CancelRun(const std::string& socket, const std::string& name);
// pause | resume | stop | reload of the daemon's run `name` (serve_run_commands.cpp says what
// each does); prints the answer.
int ServedRunAction(const std::string& socket, const std::string& name, const std::string& action);
// The daemon's answer to `action` (locate | status) on run `name`, with its "run" view; nullopt
// after printing why not (*code: the exit code). `what`: the command, for messages.
std::optional<nlohmann::json> AskServedRun(const std::string& socket, const std::string& name, const std::string& action,
                                           const std::string& what, int* code);
// The state directory a per-run command works on: `state_dir` when no run `name` is given,
// else that run's of the daemon at `socket`. "" after printing why not (*code set).
std::string StateDirOf(const std::string& state_dir, const std::string& socket, const std::string& name,
                       const std::string& what, int* code);
// Prints every config error as "<JSON pointer>: <message>" (the TorchScript members' modules
// are loaded and run once: script_model_check.h); non-zero exit when any.
int ValidateConfig(const std::string& path);
// Runs a program (argv[0] a path) and waits; returns its exit code, or -signal.
// `stdout_path` non-empty: the program's stdout goes to that file.
int RunAndWait(const std::vector<std::string>& argv, const std::string& stdout_path = "");
// The ensemble-worker to run: $ENSEMBLED_WORKER, else the one next to ensemblectl.
std::string WorkerBinary();

// A committed round of a run and its members, in the order its summary lists them.
struct CommittedRound {
  int round = 0;
  std::vector<std::string> members;      // names
  std::vector<std::string> member_dirs;  // RunLayout::MemberDir of each
  // The round's calibration (sigma_calibration.h) from its summary: one sigma map per target
  // (none: a summary without, a one-member round, a classifier, the round still open) and a
  // classifier's temperature (1: none).
  std::vector<SigmaMap> sigma_maps;
  double temperature = 1.0;
};
// Round `round` (-1: the latest committed) of the run in `state_dir`, from its journal and
// summary. Errors name the file at fault; kInvalidArgument only when `round` is not committed.
// `open_round`: the round in progress is accepted too, with the members it has finished (from
// the journal's member_done records): what a mutation command scores candidates with, while
// its round is being committed.
StatusOr<CommittedRound> FindCommittedRound(const std::string& state_dir, int round, bool open_round = false);
// The exit code for a FindCommittedRound error: kUsage for a round that is not committed,
// else kPermanentFailure (no run there, or its state is unreadable: retrying cannot help).
int RoundErrorExitCode(const Status& s);

}  // namespace ens::ctl
