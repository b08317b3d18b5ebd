// RunAs: who a served run's processes run as (ServeConfig::run_as; docs/run-as.md).
//
// run_as "daemon" (the default): every run runs as the daemon's own user, as before.
// run_as "submitter": each run's `ensembled run` (and so its workers, command members and
// mutation commands, which it starts) runs as the uid that submitted it (the SO_PEERCRED uid of
// `ensemblectl submit`, or the owner of a file dropped into runs_dir) with that user's groups.
// MapSubmitter turns that uid into credentials, or refuses it: an unknown uid, uid 0 without
// allow_root, the daemon's own user, a user outside the submitters' group. The user database is an interface so the
// mapping can be tested with a fake passwd.
// Plain data and pure functions besides SystemUsers() (getpwuid_r, getgrouplist).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/base/status.h"
#include "common/base/subprocess.h"

namespace ens {

struct UserEntry {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;  // primary group
  std::string home;
};

// The passwd and group databases, as MapSubmitter needs them.
class UserDatabase {
 public:
  virtual ~UserDatabase() = default;
  virtual std::optional<UserEntry> ByUid(uid_t uid) const = 0;
  // Every group of the user, its primary group included.
  virtual std::vector<gid_t> GroupsOf(const UserEntry& user) const = 0;
  virtual std::optional<gid_t> GroupByName(const std::string& name) const = 0;
};

// The system's (NSS). Thread-safe.
const UserDatabase& SystemUsers();

struct RunAsPolicy {
  bool submitter = false;   // run_as "submitter"
  bool allow_root = false;  // uid 0 may submit (its runs then run as root). Default: false
  gid_t group = 0;          // a submitter must be in this group (the daemon's, or submitters_group)
  // The daemon's own uid: never a submitter (its runs would be the daemon's, with its files).
  std::optional<uid_t> daemon_uid;
  std::string group_name;   // for messages
  mode_t state_dir_mode = 0750;
};

struct Submitter {
  UserEntry user;
  ProcessCredentials credentials;
};

// The credentials `uid`'s runs get, or InvalidArgument saying why that uid may not submit.
StatusOr<Submitter> MapSubmitter(uid_t uid, const RunAsPolicy& policy, const UserDatabase& users);

// The capabilities run_as "submitter" needs in the daemon: CAP_SETUID and CAP_SETGID (start a
// run as its submitter), CAP_CHOWN (give the state directory, effective config and log to
// the submitter), CAP_DAC_READ_SEARCH (read a run's journal, status and log in a state directory
// the daemon's user may not enter, and reach its control socket there), CAP_KILL (signal a
// run's processes, which are its submitter's: cancel, stop, preemption).
std::vector<int> RunAsSubmitterCapabilities();

// The state_dir_mode text ("0750") as a mode; nullopt when it is not an octal mode that gives
// its owner rwx and no one else write.
std::optional<mode_t> ParseStateDirMode(const std::string& text);

}  // namespace ens
