#include "orchestrator/serve/run_as.h"

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>

namespace ens {
namespace {

class SystemUserDatabase final : public UserDatabase {
 public:
  std::optional<UserEntry> ByUid(uid_t uid) const override {
    std::vector<char> buf(16384);
    struct passwd pw, *found = nullptr;
    if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
    return UserEntry{pw.pw_name, pw.pw_uid, pw.pw_gid, pw.pw_dir ? pw.pw_dir : ""};
  }
  std::vector<gid_t> GroupsOf(const UserEntry& user) const override {
    int n = 64;
    std::vector<gid_t> groups(static_cast<size_t>(n));
    while (::getgrouplist(user.name.c_str(), user.gid, groups.data(), &n) < 0) groups.resize(static_cast<size_t>(n));
    groups.resize(static_cast<size_t>(n));
    return groups;
  }
  std::optional<gid_t> GroupByName(const std::string& name) const override {
    std::vector<char> buf(65536);
    struct group gr, *found = nullptr;
    if (::getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr) return std::nullopt;
    return gr.gr_gid;
  }
};

}  // namespace

const UserDatabase& SystemUsers() {
  static const SystemUserDatabase* db = new SystemUserDatabase();
  return *db;
}

StatusOr<Submitter> MapSubmitter(uid_t uid, const RunAsPolicy& policy, const UserDatabase& users) {
  const std::string who = "uid " + std::to_string(uid);
  if (uid == 0 && !policy.allow_root)
    return Status::InvalidArgument(who + " (root) may not submit runs here: run_as is \"submitter\" and allow_root is false");
  if (uid != 0 && policy.daemon_uid && uid == *policy.daemon_uid)
    return Status::InvalidArgument(who + " is the daemon's own user: a run of its would hold the daemon's files; "
                                         "submit as a person (a member of the submitters' group)");
  std::optional<UserEntry> user = users.ByUid(uid);
  if (!user) return Status::InvalidArgument(who + " has no user entry (passwd): its runs cannot run as it");
  std::vector<gid_t> groups = users.GroupsOf(*user);
  if (uid != 0 && std::find(groups.begin(), groups.end(), policy.group) == groups.end())
    return Status::InvalidArgument(who + " (" + user->name + ") is not in group " + policy.group_name + " (gid " +
                                   std::to_string(policy.group) + "), the group whose members may submit runs here");
  Submitter s;
  s.credentials = {user->uid, user->gid, groups};
  s.user = std::move(*user);
  return s;
}

std::vector<int> RunAsSubmitterCapabilities() { return {CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_READ_SEARCH, CAP_KILL}; }

std::optional<mode_t> ParseStateDirMode(const std::string& text) {
  if (text.empty() || text.size() > 4 || text.find_first_not_of("01234567") != std::string::npos) return std::nullopt;
  mode_t mode = static_cast<mode_t>(std::stoul(text, nullptr, 8));
  if ((mode & 0700) != 0700 || (mode & 0022) != 0 || mode > 0777) return std::nullopt;
  return mode;
}

}  // namespace ens
