// ensemblectl's subcommands. Each returns an exit code from common/exit_codes.h and prints
// errors that name the file or place at fault.
#pragma once

#include <string>
#include <vector>

namespace ens::ctl {

// Reads the run state (run.json, journal, summaries) and prints where the run stands; when
// the daemon runs, adds its live view (workers, progress, ETA) from the control socket.
int ShowStatus(const std::string& state_dir, const std::string& socket, bool as_json);
// stop | pause | resume | reload over the control socket.
int Control(const std::string& state_dir, const std::string& socket, const std::string& cmd);
// The control socket of a run: `socket` if given, else the one status.json names, else
// <state_dir>/control.sock.
std::string FindControlSocket(const std::string& state_dir, const std::string& socket);
// Ensemble mean and std per input row, from the members of `round` (-1: the latest committed).
int Predict(const std::string& state_dir, int round, const std::string& input_csv,
            const std::string& output_csv);
// Retrains members of `round` (-1: latest committed) alone, each in a fresh worker process,
// and compares them bit for bit with the recorded ones. `member` non-empty: just that one;
// else `sample` > 0: that many, chosen repeatably; else all. Exit kVerifyMismatch on any difference.
int Verify(const std::string& state_dir, int round, const std::string& member, int sample);
// Prints every config error as "<JSON pointer>: <message>"; non-zero exit when any.
int ValidateConfig(const std::string& path);
// Runs a program (argv[0] a path) and waits; returns its exit code, or -signal.
// `stdout_path` non-empty: the program's stdout goes to that file.
int RunAndWait(const std::vector<std::string>& argv, const std::string& stdout_path = "");

}  // namespace ens::ctl
