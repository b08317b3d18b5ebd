// ensemblectl's subcommands. Each returns an exit code from common/exit_codes.h and prints
// errors that name the file or place at fault.
#pragma once

#include <string>
#include <vector>

namespace ens::ctl {

// Reads the run state (run.json, journal, summaries) and prints where the run stands.
int Status(const std::string& state_dir, bool as_json);
// Ensemble mean and std per input row, from the members of `round` (-1: the latest committed).
int Predict(const std::string& state_dir, int round, const std::string& input_csv,
            const std::string& output_csv);
// Prints every config error as "<JSON pointer>: <message>"; non-zero exit when any.
int ValidateConfig(const std::string& path);
// Runs a program (argv[0] a path) and waits; returns its exit code, or -signal.
int RunAndWait(const std::vector<std::string>& argv);

}  // namespace ens::ctl
