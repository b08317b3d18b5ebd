// ServeDaemon's run_as (orchestrator/serve/run_as.h, docs/run-as.md, docs/security.md): who each
// run runs as, and the files the daemon hands to a run's submitter.
//
// run_as "submitter": the daemon (not root; CAP_SETUID, CAP_SETGID, CAP_CHOWN,
// CAP_DAC_READ_SEARCH, CAP_KILL) makes a run's state directory <state_root>/<run> through
// descriptors (MakeOwnedDir: made and given to the submitter, owner its uid, group its primary
// group, mode state_dir_mode; one that exists must be the submitter's already: never taken over);
// a state directory elsewhere is made by the run's own `ensembled run`, as the submitter. The
// run writes everything in it as that user; the daemon only reads there, through
// common/base/no_follow.h (no link followed, the submitter's files only). What the daemon writes
// for a run stays the daemon's, in <state_root>/.serve, with the submitter's primary group and
// mode 0640: the effective config (configs/<name>.json) and the relayed log (logs/<name>.log).
// state_root, .serve and its folders are 0710 for the submitters' group: they reach their own
// files by name, list none. runs_dir is a drop directory the group writes: sticky.
#include <grp.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include "common/base/atomic_file.h"
#include "common/base/capabilities.h"
#include "common/base/no_follow.h"
#include "common/state/run_layout.h"
#include "orchestrator/serve/serve_daemon.h"
#include "orchestrator/serve/serve_layout.h"

namespace ens {
namespace {

std::string GroupName(gid_t gid) {
  std::vector<char> buf(65536);
  struct group gr, *found = nullptr;
  if (::getgrgid_r(gid, &gr, buf.data(), buf.size(), &found) == 0 && found != nullptr) return gr.gr_name;
  return std::to_string(gid);
}

}  // namespace

Status ServeDaemon::PrepareRunAs() {
  if (cfg_.run_as != RunAs::kSubmitter) {
    // Every run runs as the daemon: a capability the unit grants for run_as "submitter" is of
    // no use here (root keeps its own: it is how the daemon ran before run_as).
    return ::geteuid() == 0 ? Status::Ok() : DropAllCapabilities();
  }
  std::vector<std::string> missing = MissingCapabilities(RunAsSubmitterCapabilities());
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    return Status::InvalidArgument(
        "/run_as: \"submitter\" needs CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_READ_SEARCH and CAP_KILL in the daemon "
        "(the unit's AmbientCapabilities=, docs/run-as.md); this process lacks " + list);
  }
  run_as_.submitter = true;
  run_as_.allow_root = cfg_.allow_root;
  run_as_.state_dir_mode = *ParseStateDirMode(cfg_.state_dir_mode);  // validated with the config
  if (cfg_.submitters_group.empty()) {
    run_as_.group = ::getegid();
    run_as_.group_name = GroupName(run_as_.group);
  } else {
    std::optional<gid_t> gid = SystemUsers().GroupByName(cfg_.submitters_group);
    if (!gid) return Status::InvalidArgument("/submitters_group: no group named '" + cfg_.submitters_group + "'");
    run_as_.group = *gid;
    run_as_.group_name = cfg_.submitters_group;
  }
  run_as_.daemon_uid = ::geteuid();
  if (!HasEffectiveCapability(CAP_SETPCAP))
    spdlog::warn("no CAP_SETPCAP: a run's child keeps the capability bounding set it inherits (it still holds no "
                 "capability and has no_new_privs; the shipped unit grants CAP_SETPCAP, docs/security.md)");
  if (Status s = KeepDropDirSticky(cfg_.runs_dir); !s.ok()) return s;
  const ServeLayout serve(cfg_.state_root);
  for (const std::string& dir : {cfg_.state_root, serve.dir(), serve.ConfigsDir(), serve.LogsDir()}) {
    if (Status s = MakeDirs(dir); !s.ok()) return s;
    if (::chown(dir.c_str(), static_cast<uid_t>(-1), run_as_.group) != 0 || ::chmod(dir.c_str(), 0710) != 0)
      return Status::FromErrno("opening " + dir + " to group " + run_as_.group_name, errno);
  }
  spdlog::info("runs run as their submitters (members of group {}; root {}); state directories {:04o}",
               run_as_.group_name, run_as_.allow_root ? "allowed" : "refused", run_as_.state_dir_mode);
  return Status::Ok();
}

std::string ServeDaemon::RefuseSubmitter(uid_t uid) const {
  if (!run_as_.submitter) return "";
  StatusOr<Submitter> who = MapSubmitter(uid, run_as_, SystemUsers());
  return who.ok() ? "" : who.status().message();
}

StatusOr<Submitter> ServeDaemon::PrepareSubmitterRun(const ServedRun& run) {
  StatusOr<Submitter> who = MapSubmitter(run.submitter, run_as_, SystemUsers());
  if (!who.ok()) return Status::InvalidArgument("its submitter cannot run it: " + who.status().message());
  const ProcessCredentials& c = who->credentials;
  // <state_root>/<run>: made here, through descriptors, and given to the submitter; one that
  // exists must be the submitter's (a resumed run's). Elsewhere: its `ensembled run` makes it,
  // as the submitter, where the submitter may.
  if (PlainPath(ParentDir(PlainPath(run.state_dir))) == PlainPath(cfg_.state_root)) {
    StatusOr<bool> made =
        MakeOwnedDir(PlainPath(cfg_.state_root), BaseName(PlainPath(run.state_dir)), run_as_.state_dir_mode, c.uid, c.gid);
    if (!made.ok()) return Status::InvalidArgument("its state directory: " + made.status().message());
  }
  if (Status s = ShareWithSubmitter(run.config_file, c.gid); !s.ok()) return s;
  return who;
}

FileCheck ServeDaemon::RunFiles(const ServedRun& run) const {
  return {run_as_.submitter ? run.submitter : ::geteuid()};
}

Status KeepDropDirSticky(const std::string& dir) {
  StatusOr<int> opened = OpenDirNoFollow(dir, {});
  if (!opened.ok()) return Status::InvalidArgument("/runs_dir: " + opened.status().message());
  const int fd = *opened;
  struct stat st {};
  Status s = ::fstat(fd, &st) == 0 ? Status::Ok() : Status::FromErrno("stat " + dir, errno);
  if (s.ok() && (st.st_mode & S_ISVTX) == 0 && (st.st_mode & 0022) != 0) {
    if (st.st_uid == ::geteuid()) {
      if (::fchmod(fd, (st.st_mode & 07777) | S_ISVTX) != 0) s = Status::FromErrno("chmod +t " + dir, errno);
      else spdlog::info("runs_dir {}: made sticky (a submitter may not rename or remove another's file)", dir);
    } else {
      s = Status::InvalidArgument("/runs_dir: " + dir + " is writable by its group or others and not sticky: any "
                                  "submitter could replace another's file (chmod +t " + dir + ")");
    }
  }
  ::close(fd);
  return s;
}

std::string ServeDaemon::LogOf(const ServedRun& run) const {
  if (!run_as_.submitter) return RunLayout(run.state_dir).ServeLog();
  return ServeLayout(cfg_.state_root).RunLog(run.name);
}

Status ServeDaemon::ShareWithSubmitter(const std::string& path, gid_t gid) const {
  if (!run_as_.submitter) return Status::Ok();
  if (::lchown(path.c_str(), static_cast<uid_t>(-1), gid) != 0 || ::chmod(path.c_str(), 0640) != 0)
    return Status::FromErrno("sharing " + path + " with group " + std::to_string(gid), errno);
  return Status::Ok();
}

}  // namespace ens
