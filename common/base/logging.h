// Logging setup shared by the binaries: spdlog to stderr, so stdout stays for progress and
// results. Under systemd (JOURNAL_STREAM set) each line starts with its syslog priority
// ("<4>...") and the timestamp is left to journald.
#pragma once

#include <string>

namespace ens {

// `log_file` non-empty: also a rotating file (10 MiB x 3).
void InitLogging(const std::string& name, const std::string& log_file = "");
// True when stderr goes to journald (systemd sets JOURNAL_STREAM): lines carry "<N>" priorities.
bool UnderJournald();
// Directory holding the running executable (to find sibling binaries).
std::string SelfDir();

}  // namespace ens
