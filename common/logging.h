// Logging setup shared by the binaries: spdlog to stderr, so stdout stays for progress and
// results. Under systemd (JOURNAL_STREAM set) the timestamp is left to journald.
#pragma once

#include <string>

namespace ens {

void InitLogging(const std::string& name);
// Directory holding the running executable (to find sibling binaries).
std::string SelfDir();

}  // namespace ens
