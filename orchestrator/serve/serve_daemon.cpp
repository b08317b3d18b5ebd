#include "orchestrator/serve/serve_daemon.h"

#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <spdlog/spdlog.h>

#include "common/base/atomic_file.h"
#include "common/base/fd_io.h"
#include "common/base/exit_codes.h"
#include "common/base/no_follow.h"
#include "common/state/run_layout.h"
#include "orchestrator/gpu/gpu_discovery.h"
#include "orchestrator/gpu/nvml.h"
#include "orchestrator/serve/serve_journal.h"
#include "orchestrator/serve/serve_layout.h"
#include "orchestrator/serve/submit_policy.h"
#include "common/ipc/control_protocol.h"

namespace ens {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The poll timeout when nothing is due sooner: the fallback re-read of runs_dir (a directory
// where inotify says nothing, e.g. on NFS) and the watchdog.
constexpr int kIdleWakeMs = 5000;
// The longest wait before a crashed run's restart.
constexpr double kMaxBackoffSeconds = 60;

// A run config in runs_dir: "*.json", not hidden (editors' and `submit`'s temporary files are).
bool IsRunFile(const fs::path& p) { return p.extension() == ".json" && p.filename().string()[0] != '.'; }

// A file of runs_dir as it is there (lstat: a link is not followed; reading it refuses it).
std::optional<std::pair<int64_t, int64_t>> Stamp(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  return std::pair<int64_t, int64_t>{int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec, st.st_size};
}

std::string Join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string ErrorText(const ConfigError& e) { return (e.pointer.empty() ? "/" : e.pointer) + ": " + e.message; }

// AskOf's and other errors start with their pointer: "/resources/gpus/0: ...".
ConfigError AsConfigError(const Status& s) {
  const std::string& m = s.message();
  size_t colon = m.find(": ");
  if (!m.empty() && m[0] == '/' && colon != std::string::npos) return {m.substr(0, colon), m.substr(colon + 2)};
  return {"", m};
}

// The largest config file the daemon reads from runs_dir.
constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// Why a run stopped, from the end of its log (the daemon's own file: the relayed output): its
// last error line, else its last line.
std::string LastLogLine(const std::string& log) {
  StatusOr<int> fd = OpenNoFollow(log, {::geteuid(), UINT64_MAX});
  if (!fd.ok()) return "";
  struct stat st {};
  std::string s;
  if (::fstat(*fd, &st) == 0) {
    const uint64_t size = static_cast<uint64_t>(st.st_size), from = size > 65536 ? size - 65536 : 0;
    s.resize(size - from);
    if (!PreadFull(*fd, s.data(), s.size(), from, log).ok()) s.clear();
  }
  ::close(*fd);
  std::string last;
  size_t end = s.size();
  while (end > 0) {
    size_t start = s.rfind('\n', end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    std::string line = s.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty()) {
      if (last.empty()) last = line;
      if (line.find("error") != std::string::npos) return line.substr(0, 400);
    }
    if (start == 0) break;
    end = start - 1;
  }
  return last.substr(0, 400);
}

// The GPUs the daemon hands out: resources.gpus over what this process may use (an inherited
// CUDA_VISIBLE_DEVICES narrows it, as for a run).
StatusOr<std::vector<ServeGpu>> ServeGpus(const ServeResources& r) {
  if (r.gpus.none()) return std::vector<ServeGpu>{};
  GpuDiscovery found = DiscoverThisProcess();
  if (!found.usable.ok()) return found.usable.status();
  spdlog::info("GPUs: {}", DescribeInventory(found.inventory));
  StatusOr<std::vector<std::string>> picked = ResolveGpuSelection(
      r.gpus, Candidates(*found.usable), "/resources/gpus", UsableWhat(found.inventory, *found.usable));
  if (!picked.ok()) return picked.status();
  std::vector<ServeGpu> out;
  for (const std::string& id : *picked)
    for (const UsableGpu& d : found.usable->devices)
      if (d.id == id) out.push_back({d.id, d.gpu_index, DeviceMemoryBytes(found.inventory, d)});
  return out;
}

std::string FormatSeconds(double s) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.3g s", s);
  return b;
}

std::string Normal(const std::string& path) { return fs::path(path).lexically_normal().string(); }

// The level of a line of a run's log ("[time] [ensembled] [warning] ..."): it keeps it in the
// daemon's log (and so journald's priority). Lines of another shape are info.
spdlog::level::level_enum LevelOfRunLine(std::string_view line) {
  std::string_view head = line.substr(0, 80);
  if (head.find("] [critical] ") != std::string_view::npos) return spdlog::level::critical;
  if (head.find("] [error] ") != std::string_view::npos) return spdlog::level::err;
  if (head.find("] [warning] ") != std::string_view::npos) return spdlog::level::warn;
  return spdlog::level::info;
}

// Removes null and "" members of objects, at any depth (array items stay: argv may hold "").
void DropUnset(json& j) {
  if (j.is_array()) {
    for (json& item : j) DropUnset(item);
    return;
  }
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end();) {
    if (it->is_null() || (it->is_string() && it->get_ref<const std::string&>().empty())) {
      it = j.erase(it);
    } else {
      DropUnset(*it);
      ++it;
    }
  }
}

}  // namespace

StatusOr<std::string> EffectiveConfigText(const Config& cfg) {
  json j = ConfigToJson(cfg);
  DropUnset(j);
  std::string text = j.dump(2) + "\n";
  Config back;
  std::vector<ConfigError> errors = ValidateConfigText(text, "/", &back);
  if (!errors.empty()) return Status::Internal("the effective config does not read back: " + ErrorText(errors[0]));
  if (ConfigToJson(back) != ConfigToJson(cfg)) return Status::Internal("the effective config reads back as another config");
  return text;
}

ServeDaemon::ServeDaemon(ServeConfig cfg, ServeOptions opts) : cfg_(std::move(cfg)), opts_(std::move(opts)) {}

bool ServeDaemon::IsAdmin(uid_t uid) const {
  if (uid == 0) return true;
  if (!admins_gid_) return false;
  std::optional<UserEntry> user = SystemUsers().ByUid(uid);
  if (!user) return false;
  std::vector<gid_t> groups = SystemUsers().GroupsOf(*user);
  return std::find(groups.begin(), groups.end(), *admins_gid_) != groups.end();
}

ServeDaemon::~ServeDaemon() {
  if (inotify_fd_ >= 0) ::close(inotify_fd_);
}

double ServeDaemon::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void ServeDaemon::Append(json record) {
  Status s = journal_->Append(std::move(record));
  // The queue goes on; what is lost is only what a restart of the daemon would remember.
  if (!s.ok()) spdlog::error("queue journal: {}", s.ToString());
}

Status ServeDaemon::Start() {
  for (const std::string& dir : {cfg_.state_root, ServeLayout(cfg_.state_root).ConfigsDir()}) {
    if (Status s = MakeDirs(dir); !s.ok()) return s;
  }
  if (!PathExists(cfg_.runs_dir)) {
    if (Status s = MakeDirs(cfg_.runs_dir, 0755); !s.ok()) return s;
  }
  if (Status s = PrepareRunAs(); !s.ok()) return s;
  if (!cfg_.limits.admins_group.empty()) {
    admins_gid_ = SystemUsers().GroupByName(cfg_.limits.admins_group);
    if (!admins_gid_) return Status::InvalidArgument("/limits/admins_group: no group named '" + cfg_.limits.admins_group + "'");
  }
  StatusOr<std::vector<ServeGpu>> gpus = ServeGpus(cfg_.resources);
  if (!gpus.ok()) return Status::InvalidArgument(gpus.status().message());
  queue_ = std::make_unique<RunQueue>(GrantPool(*gpus, cfg_.resources.cpu_workers));
  if (gpus->empty())
    spdlog::info("serving runs on {} CPU worker slots (no GPU)", cfg_.resources.cpu_workers);
  else
    spdlog::info("serving runs on {} GPUs", gpus->size());
  auto journal = Journal::Open(ServeLayout(cfg_.state_root).QueueJournal());
  if (!journal.ok()) return journal.status();
  journal_ = std::move(*journal);

  inotify_fd_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd_ < 0) return Status::FromErrno("inotify_init1", errno);
  if (::inotify_add_watch(inotify_fd_, cfg_.runs_dir.c_str(),
                          IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_ATTRIB) < 0)
    return Status::FromErrno("inotify_add_watch " + cfg_.runs_dir, errno);

  std::string socket = ServeControlSocket(cfg_);
  if (Status s = MakeDirs(ParentDir(socket)); !s.ok()) return s;
  if (Status s = control_.Listen(socket, 0660); !s.ok()) return s;
  spdlog::info("control socket {}; runs_dir {}; state_root {}", socket, cfg_.runs_dir, cfg_.state_root);
  if (cfg_.service.http_port > 0) {
    http_ = std::make_unique<HttpEndpoint>();
    json gpus = json::array();
    for (const ServeGpu& g : queue_->pool().gpus()) gpus.push_back({{"id", g.id}, {"index", g.index}});
    std::string token;
    if (!cfg_.http_token_file.empty()) {
      auto text = ReadNoFollow(cfg_.http_token_file, {std::nullopt, 4096});
      if (!text.ok()) return Status::InvalidArgument("/http_token_file: " + text.status().message());
      token = text->substr(0, text->find('\n'));
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
      if (token.size() < 16)
        return Status::InvalidArgument("/http_token_file: " + cfg_.http_token_file + ": its first line is the token, "
                                       "at least 16 characters");
    }
    AddServeRoutes(*http_, http_runs_, {gpus, token, !run_as_.submitter});
    if (Status s = http_->Start(cfg_.service.http_bind, cfg_.service.http_port); !s.ok()) return s;
    spdlog::info("runs and metrics on http://{}:{}/", cfg_.service.http_bind, cfg_.service.http_port);
  }

  if (Status s = ResumeFromJournal(); !s.ok()) return s;
  ScanRunsDir();
  StartRuns();
  return Status::Ok();
}

// Every run the journal knows: ended ones are listed as they ended; the others are queued
// again in their old order, and those that were running start first.
Status ServeDaemon::ResumeFromJournal() {
  ServeJournalState st = ReplayServeJournal(journal_->records());
  next_seq_ = st.next_seq;
  for (const auto& [name, jr] : st.runs) {
    ServedRun run;
    run.name = name;
    run.file = Exists(jr.file) ? jr.file : "";
    run.priority = std::clamp(jr.priority, -kPriorityBound, kPriorityBound);
    run.seq = jr.seq;
    run.submitter = jr.uid;
    run.preemptions = jr.preemptions;
    if (jr.ended) {
      run.state = jr.end_state == "finished" ? RunState::kFinished
                  : jr.end_state == "failed" ? RunState::kFailed
                                             : RunState::kCancelled;
      run.reason = jr.end_reason;
      runs_[name] = std::move(run);
      continue;
    }
    run.resume_first = jr.started;
    ServedRun& r = runs_[name] = std::move(run);
    if (r.file.empty()) {
      End(r, RunState::kCancelled, "its config file " + jr.file + " was removed while the daemon was down");
      continue;
    }
    // Its config as the daemon took it (its effective config, in the daemon's own folder; a
    // reload rewrites it), never its file in runs_dir again, which others may write.
    r.config_file = ServeLayout(cfg_.state_root).RunConfig(name);
    auto text = ReadNoFollow(r.config_file, {::geteuid(), kMaxConfigBytes});
    Config cfg;
    std::vector<ConfigError> errors = text.ok() ? ValidateServedRunConfig(*text, ParentDir(r.file), cfg_.state_root, &cfg)
                                                : std::vector<ConfigError>{{"", text.status().message()}};
    if (errors.empty()) errors = StateDirRules(cfg, name);
    StatusOr<RunAsk> ask = errors.empty() ? queue_->pool().AskOf(cfg.resources) : StatusOr<RunAsk>(RunAsk{});
    if (!ask.ok()) errors.push_back(AsConfigError(ask.status()));
    if (!errors.empty()) {
      r.errors = errors;
      End(r, RunState::kRejected, "its config no longer validates: " + ErrorText(errors[0]));
      continue;
    }
    r.ask = *ask;
    r.state_dir = cfg.state_dir;
    r.rounds = cfg.rounds.count;
    r.members = static_cast<int>(cfg.members.size());
    StatusOr<std::string> effective = EffectiveConfigText(cfg);
    if (!effective.ok()) return effective.status();
    if (Status s = WriteFileAtomic(r.config_file, *effective); !s.ok()) return s;
    r.reason = r.resume_first ? "resuming (it was running when the daemon stopped)" : "waiting for its turn";
    spdlog::info("run {}: {}", name, r.reason);
  }
  return Status::Ok();
}

ServedRun* ServeDaemon::FindRun(const std::string& name) {
  auto it = runs_.find(name);
  return it == runs_.end() ? nullptr : &it->second;
}

ServedRun* ServeDaemon::RunOfFile(const std::string& file) {
  for (auto& [name, run] : runs_)
    if (run.file == file) return &run;
  return nullptr;
}

std::string ServeDaemon::StateDirConflict(const std::string& state_dir, const std::string& except) const {
  const std::string dir = PlainPath(state_dir), root = PlainPath(cfg_.state_root);
  if (PathWithin(root, dir)) return "is the daemon's state_root " + root + " or a folder above it";
  if (PathWithin(dir, ServeStateDir(cfg_))) return "is inside the daemon's own folder " + ServeStateDir(cfg_);
  if (PathWithin(dir, cfg_.runs_dir) || PathWithin(cfg_.runs_dir, dir)) return "is or holds runs_dir " + cfg_.runs_dir;
  for (const auto& [name, run] : runs_) {
    if (name == except || IsEnded(run.state) || run.state_dir.empty()) continue;
    if (PathWithin(dir, run.state_dir) || PathWithin(run.state_dir, dir))
      return "is, or is inside or around, the state directory of run " + name + " (" + run.state_dir + ")";
  }
  if (run_as_.submitter && PathWithin(dir, root) && PlainPath(ParentDir(dir)) != root)
    return "is inside state_root but not one of its folders (" + root + "/<name>): only those are made for a run";
  return "";
}

std::vector<ConfigError> ServeDaemon::StateDirRules(const Config& cfg, const std::string& name) const {
  if (std::string why = StateDirConflict(cfg.state_dir, name); !why.empty())
    return {{"/state_dir", cfg.state_dir + " " + why}};
  return {};
}

void ServeDaemon::ScanRunsDir() {
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::string>> present;  // (stamp, path), oldest first
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cfg_.runs_dir, ec)) {
    if (!IsRunFile(entry.path())) continue;  // anything else named *.json is refused when read
    std::string path = Normal(fs::absolute(entry.path(), ec).string());
    if (auto stamp = Stamp(path)) present.push_back({*stamp, path});
  }
  if (ec) spdlog::warn("reading {}: {}", cfg_.runs_dir, ec.message());
  std::sort(present.begin(), present.end());
  auto is_present = [&](const std::string& f) {
    return std::any_of(present.begin(), present.end(), [&](const auto& p) { return p.second == f; });
  };
  for (auto& [name, run] : runs_) {
    if (run.file.empty() || is_present(run.file)) continue;
    std::string gone = run.file;
    run.file.clear();
    if (!IsEnded(run.state)) Cancel(run, "its config file " + gone + " was removed");
  }
  for (auto it = rejected_.begin(); it != rejected_.end();) {
    if (is_present(it->first)) {
      ++it;
    } else {
      rejected_stamp_.erase(it->first);
      it = rejected_.erase(it);
    }
  }
  for (const auto& [stamp, path] : present) {
    if (RunOfFile(path) != nullptr) continue;
    if (auto r = rejected_stamp_.find(path); r != rejected_stamp_.end() && r->second == stamp) continue;
    // Read once, through no link, as what it is: its owner is the descriptor's, the very file read.
    uid_t owner = 0;
    auto text = ReadNoFollow(path, {std::nullopt, kMaxConfigBytes}, &owner);
    if (!text.ok()) {
      Reject(path, fs::path(path).stem().string(), {{"", text.status().message()}});
      continue;
    }
    AdmitFile(path, *text, owner, 0);
  }
}

ServedRun* ServeDaemon::AdmitFile(const std::string& file, const std::string& text, uid_t owner, int priority) {
  std::string name = fs::path(file).stem().string();
  Config cfg;
  std::vector<ConfigError> errors = ValidateServedRunConfig(text, ParentDir(file), cfg_.state_root, &cfg);
  if (errors.empty()) {
    name = cfg.run_name;
    errors = Admissible(cfg);
  }
  if (std::string why = RefuseSubmitter(owner); errors.empty() && !why.empty())
    errors.push_back({"", "its submitter: " + why});
  if (errors.empty()) {
    SubmitterUsage usage;
    for (const auto& [n, r] : runs_) {
      if (r.submitter != owner || IsEnded(r.state)) continue;
      usage.runs += 1;
      usage.gpus += GpusOf(r.ask);
      usage.cpu_workers += r.ask.cpu_workers;
    }
    if (std::string why = RefuseQuota(owner, usage, *queue_->pool().AskOf(cfg.resources), cfg_.limits); !why.empty())
      errors.push_back({"", "its submitter: " + why});
  }
  if (!errors.empty()) {
    Reject(file, name, std::move(errors));
    return nullptr;
  }
  ServedRun run;
  run.name = name;
  run.file = file;
  run.config_file = ServeLayout(cfg_.state_root).RunConfig(name);
  run.state_dir = cfg.state_dir;
  run.priority = priority;
  run.seq = next_seq_++;
  run.submitter = owner;
  run.ask = *queue_->pool().AskOf(cfg.resources);  // Admissible checked it
  run.rounds = cfg.rounds.count;
  run.members = static_cast<int>(cfg.members.size());
  run.reason = "waiting for its turn";
  StatusOr<std::string> effective = EffectiveConfigText(cfg);
  Status s = effective.ok() ? WriteFileAtomic(run.config_file, *effective) : effective.status();
  if (!s.ok()) {
    Reject(file, name, {{"", "cannot write its effective config: " + s.message()}});
    return nullptr;
  }
  Append(SubmittedRecord(name, file, priority, run.seq, owner));
  rejected_.erase(file);
  rejected_stamp_.erase(file);
  spdlog::info("queued run {} from {} (priority {}, asks {})", name, file, priority, DescribeGrant(run.ask));
  ServedRun& r = runs_[name] = std::move(run);
  return &r;
}

std::vector<ConfigError> ServeDaemon::Admissible(const Config& cfg) {
  if (ServedRun* other = FindRun(cfg.run_name); other != nullptr && (!IsEnded(other->state) || !other->file.empty()))
    return {{"/run_name", "run '" + cfg.run_name + "' is already " + RunStateName(other->state) + " here (its file: " +
                              (other->file.empty() ? std::string("removed") : other->file) + ")"}};
  if (std::vector<ConfigError> e = StateDirRules(cfg, cfg.run_name); !e.empty()) return e;
  StatusOr<RunAsk> ask = queue_->pool().AskOf(cfg.resources);
  if (!ask.ok()) return {AsConfigError(ask.status())};
  return {};
}

void ServeDaemon::Reject(const std::string& file, const std::string& name, std::vector<ConfigError> errors) {
  ServedRun run;
  run.name = name;
  run.file = file;
  run.state = RunState::kRejected;
  run.reason = errors.empty() ? "" : ErrorText(errors[0]);
  for (const ConfigError& e : errors) spdlog::warn("rejected {}: {}", file, ErrorText(e));
  run.errors = std::move(errors);
  if (auto stamp = Stamp(file)) rejected_stamp_[file] = *stamp;
  rejected_[file] = std::move(run);
}

void ServeDaemon::StartRuns() {
  if (stop_signals_ > 0) return;
  // While runs stop for a preempting run, the grants they free are its: no run of a lower
  // priority starts meanwhile.
  const ServedRun* making_room_for = nullptr;
  for (const auto& [name, run] : runs_)
    if (run.state == RunState::kPreempting)
      if (auto it = runs_.find(run.preempted_by); it != runs_.end() && it->second.state == RunState::kQueued)
        making_room_for = &it->second;
  std::vector<ServedRun*> all;
  for (auto& [name, run] : runs_) {
    if (making_room_for != nullptr && run.state == RunState::kQueued && run.priority < making_room_for->priority) {
      run.reason = "waits while runs stop to make room for run " + making_room_for->name + " (priority " +
                   std::to_string(making_room_for->priority) + ")";
      continue;
    }
    all.push_back(&run);
  }
  for (ServedRun* run : queue_->StartNow(all, Now())) StartRun(*run);
  bool preempting = std::any_of(runs_.begin(), runs_.end(), [](const auto& r) { return r.second.state == RunState::kPreempting; });
  if (cfg_.preemption.enabled && !preempting) PreemptForWaitingRun(all);
}

void ServeDaemon::PreemptForWaitingRun(const std::vector<ServedRun*>& runs) {
  for (ServedRun* waiting : RunQueue::StartOrder(runs)) {
    if (waiting->not_before > Now()) continue;
    std::vector<ServedRun*> victims = queue_->PreemptFor(*waiting, runs, cfg_.preemption.min_priority_gap);
    if (victims.empty()) continue;
    std::string names;
    for (ServedRun* v : victims) {
      names += (names.empty() ? "" : ", ") + v->name + " (priority " + std::to_string(v->priority) + ")";
      if (Status s = queue_->Move(*v, RunState::kPreempting); !s.ok()) {
        spdlog::error("{}", s.ToString());
        continue;
      }
      v->preempted_by = waiting->name;
      v->kill_at = Now() + cfg_.preemption.grace_s;
      v->killed = false;
      v->reason = "preempted by run " + waiting->name + " (priority " + std::to_string(waiting->priority) +
                  "): its running members may finish for " + FormatSeconds(cfg_.preemption.grace_s) +
                  ", then it goes back to the queue";
      if (auto it = children_.find(v->name); it != children_.end()) it->second.Signal(SIGTERM);
      spdlog::info("run {}: {}", v->name, v->reason);
    }
    waiting->reason = "preempting " + names + " for its ask (" + DescribeGrant(waiting->ask) + ")";
    spdlog::info("run {} (priority {}): {}", waiting->name, waiting->priority, waiting->reason);
    return;  // one preemption at a time: the next is planned once these runs are gone
  }
}

void ServeDaemon::KillOverduePreempted() {
  for (auto& [name, run] : runs_) {
    if (run.state != RunState::kPreempting || run.killed || Now() < run.kill_at) continue;
    run.killed = true;
    if (auto it = children_.find(name); it != children_.end()) it->second.Signal(SIGKILL);
    spdlog::warn("run {}: still running {} after its preemption; killed (members in flight are trained again "
                 "when it resumes)", name, FormatSeconds(cfg_.preemption.grace_s));
  }
}

void ServeDaemon::StartRun(ServedRun& run) {
  std::optional<Submitter> as;  // run_as "submitter": who it runs as
  if (run_as_.submitter) {
    StatusOr<Submitter> who = PrepareSubmitterRun(run);
    if (!who.ok()) {
      End(run, RunState::kFailed, who.status().message());
      return;
    }
    as = std::move(*who);
  } else if (Status s = MakeDirs(run.state_dir); !s.ok()) {
    End(run, RunState::kFailed, "cannot make its state directory: " + s.message());
    return;
  }
  SubprocessSpec spec;
  spec.argv = {opts_.ensembled, "run", "--config", run.config_file};
  spec.set_env = {{"CUDA_VISIBLE_DEVICES", Join(run.grant.gpus, ",")}};
  // The run is not the unit's main process: systemd's variables are the daemon's alone. Its
  // output is a pipe, not journald's stream (JOURNAL_STREAM): its lines keep their timestamps.
  spec.unset_env = {"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS",
                    "LISTEN_PID",    "LISTEN_FDNAMES", "JOURNAL_STREAM"};
  spec.own_process_group = true;  // a Ctrl-C of the daemon's terminal reaches the daemon alone
  spec.die_with_parent = true;    // a daemon killed with SIGKILL leaves no run without its supervisor
  spec.stdin_mode = SubprocessSpec::Stdio::kNull;
  spec.stdout_mode = SubprocessSpec::Stdio::kPipe;  // read by its RunLogRelay
  spec.stderr_to_stdout = true;
  if (as) {
    // Its supervisor, and all it starts, run as the submitter with no capability. Its control
    // socket is <state_dir>/control.sock (no RUNTIME_DIRECTORY: the daemon's), 0666 in its
    // state directory, so that the daemon may connect; its home is its state directory.
    spec.credentials = as->credentials;
    spec.drop_capabilities = true;
    spec.unset_env.push_back("RUNTIME_DIRECTORY");
    spec.set_env.insert(spec.set_env.end(), {{"HOME", run.state_dir}, {"USER", as->user.name},
                                             {"LOGNAME", as->user.name}, {"ENSEMBLED_CONTROL_SOCKET_MODE", "0666"}});
  }
  StatusOr<Subprocess> child = Subprocess::Start(spec);
  if (!child.ok()) {
    End(run, RunState::kFailed, "cannot start `ensembled run`: " + child.status().message());
    return;
  }
  const std::string log = LogOf(run);
  auto relay = RunLogRelay::Open(child->TakeStdout(), log, [name = run.name](std::string_view line) {
    if (!line.empty()) spdlog::log(LevelOfRunLine(line), "[run {}] {}", name, line);
  });
  Status shared = relay.ok() && as ? ShareWithSubmitter(log, as->credentials.gid) : Status::Ok();
  if (!relay.ok() || !shared.ok()) {  // (the child, without its output, is killed with its Subprocess)
    End(run, RunState::kFailed, "cannot open its log: " + (relay.ok() ? shared : relay.status()).message());
    return;
  }
  relays_.emplace_back(run.name, std::move(*relay));
  run.pid = child->pid();
  run.resume_first = false;
  children_[run.name] = std::move(*child);
  started_at_[run.name] = Now();
  Append(StartedRecord(run.name, run.grant.gpus, run.grant.cpu_workers, run.pid));
  spdlog::info("started run {} (pid {}) with {}; its log: {}", run.name, run.pid, DescribeGrant(run.grant), log);
}

void ServeDaemon::PumpLogs(const std::string& name, bool at_exit) {
  for (auto it = relays_.begin(); it != relays_.end();) {
    if (!name.empty() && it->first != name) {
      ++it;
      continue;
    }
    RunLogRelay& relay = *it->second;
    relay.Pump(at_exit ? size_t{64} << 20 : RunLogRelay::kPumpBudget);
    if (at_exit) relay.FlushLine();
    it = relay.ended() ? relays_.erase(it) : it + 1;
  }
}

void ServeDaemon::ReapChildren() {
  for (auto it = children_.begin(); it != children_.end();) {
    if (!it->second.Exited()) {
      ++it;
      continue;
    }
    ExitInfo exit = it->second.exit();
    std::string name = it->first;
    it = children_.erase(it);
    PumpLogs(name, /*at_exit=*/true);  // its last words are in serve.log before they are read
    if (ServedRun* run = FindRun(name)) RunEnded(*run, exit);
  }
}

void ServeDaemon::RunEnded(ServedRun& run, const ExitInfo& exit) {
  double ran = Now() - started_at_[run.name];
  run.pid = 0;
  spdlog::info("run {}: `ensembled run` {} after {:.1f} s", run.name, exit.Describe(), ran);
  if (run.state == RunState::kStopping) {
    End(run, RunState::kCancelled, run.reason);
    return;
  }
  if (stop_signals_ > 0) return;  // the daemon is stopping: the run resumes when it starts again
  if (run.state == RunState::kPreempting) {
    PreemptedRunEnded(run, exit);
    return;
  }
  if (exit.ok()) {
    const RunProgress* p = ProgressOf(run);
    if (p != nullptr && p->finished)
      End(run, RunState::kFinished, p->finish_reason);
    else
      End(run, RunState::kCancelled, "it stopped before its last round without being cancelled here "
                                     "(ensemblectl stop on its own socket?); its state is kept");
    return;
  }
  std::string why = exit.Describe();
  if (std::string line = LastLogLine(LogOf(run)); !line.empty()) why += ": " + line;
  if (!exit.signaled && exit.code == exit_code::kPermanentFailure) {
    End(run, RunState::kFailed, why);
    return;
  }
  run.crashes = ran >= kRunHealthySeconds ? 1 : run.crashes + 1;
  if (run.crashes > kRunRestartBudget) {
    End(run, RunState::kFailed, "crashed " + std::to_string(run.crashes) + " times in a row; the last: " + why);
    return;
  }
  double backoff = std::min(kMaxBackoffSeconds, static_cast<double>(1 << (run.crashes - 1)));
  if (Status s = queue_->Move(run, RunState::kQueued); !s.ok()) spdlog::error("{}", s.ToString());
  run.not_before = Now() + backoff;
  run.resume_first = true;
  run.reason = "restart " + std::to_string(run.crashes) + " of " + std::to_string(kRunRestartBudget) + " in " +
               std::to_string(static_cast<int>(backoff)) + " s after: " + why;
  spdlog::warn("run {}: {}", run.name, run.reason);
}

void ServeDaemon::PreemptedRunEnded(ServedRun& run, const ExitInfo& exit) {
  const RunProgress* progress = ProgressOf(run);
  const RunProgress p = progress != nullptr ? *progress : RunProgress{};
  if (exit.ok() && p.finished) {
    End(run, RunState::kFinished, p.finish_reason);
    return;
  }
  if (!exit.signaled && exit.code == exit_code::kPermanentFailure) {
    End(run, RunState::kFailed, exit.Describe() + ": " + LastLogLine(LogOf(run)));
    return;
  }
  if (Status s = queue_->Move(run, RunState::kQueued); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return;
  }
  run.preemptions += 1;
  run.resume_first = false;
  run.reason = "preempted by run " + run.preempted_by + (run.killed ? " (killed after its grace)" : "") +
               "; resumes from its journal when its turn comes (" + std::to_string(p.committed.size()) +
               " rounds committed)";
  Append(PreemptedRecord(run.name, run.preempted_by, run.reason));
  spdlog::info("run {}: {}", run.name, run.reason);
}

void ServeDaemon::End(ServedRun& run, RunState to, const std::string& reason) {
  if (Status s = queue_->Move(run, to); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return;
  }
  run.reason = reason;
  run.pid = 0;
  Append(EndedRecord(run.name, RunStateName(to), reason));
  spdlog::info("run {} {}: {}", run.name, RunStateName(to), reason);
}

void ServeDaemon::Cancel(ServedRun& run, const std::string& why) {
  if (run.state == RunState::kQueued) {
    End(run, RunState::kCancelled, why);
  } else if (run.state == RunState::kRunning || run.state == RunState::kPreempting) {
    if (Status s = queue_->Move(run, RunState::kStopping); !s.ok()) {
      spdlog::error("{}", s.ToString());
      return;
    }
    run.reason = why;
    if (auto it = children_.find(run.name); it != children_.end()) it->second.Signal(SIGTERM);
    spdlog::info("run {}: stopping ({})", run.name, why);
  }
}

std::string ServeDaemon::QueueStatus() const {
  std::map<RunState, int> n;
  for (const auto& [name, run] : runs_) ++n[run.state];
  std::string s = std::to_string(n[RunState::kRunning] + n[RunState::kStopping] + n[RunState::kPreempting]) + " running, " +
                  std::to_string(n[RunState::kQueued]) + " queued";
  if (int ended = n[RunState::kFinished] + n[RunState::kFailed] + n[RunState::kCancelled]; ended > 0)
    s += "; " + std::to_string(n[RunState::kFinished]) + " finished, " + std::to_string(n[RunState::kFailed]) +
         " failed, " + std::to_string(n[RunState::kCancelled]) + " cancelled";
  if (!rejected_.empty()) s += "; " + std::to_string(rejected_.size()) + " rejected";
  return s;
}

void ServeDaemon::HandleSignals() {
  struct signalfd_siginfo si;
  while (opts_.signal_fd >= 0 && ::read(opts_.signal_fd, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGHUP) {
      spdlog::info("SIGHUP: reading {} again", cfg_.runs_dir);
      ScanRunsDir();
    } else if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT) {
      ++stop_signals_;
      int sig = stop_signals_ == 1 ? SIGTERM : SIGKILL;
      spdlog::info("signal {}: {} {} run(s); they resume when the daemon starts again", si.ssi_signo,
                   sig == SIGTERM ? "stopping" : "killing", children_.size());
      notifier_.Stopping();
      for (auto& [name, child] : children_) child.Signal(sig);
    }
  }
}

int ServeDaemon::Run() {
  if (Status s = Start(); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  notifier_.Ready();
  for (;;) {
    ReapChildren();
    if (stop_signals_ > 0 && children_.empty()) break;
    KillOverduePreempted();
    StartRuns();
    notifier_.MaybePingWatchdog();
    notifier_.Status(QueueStatus());
    if (http_) http_runs_.Publish(List()["runs"]);
    int timeout = kIdleWakeMs;
    if (int ping = notifier_.watchdog_ping_ms(); ping > 0) timeout = std::min(timeout, ping);
    for (const auto& [name, run] : runs_) {
      if (run.state == RunState::kQueued && run.not_before > Now())
        timeout = std::min(timeout, static_cast<int>((run.not_before - Now()) * 1000) + 1);
      if (run.state == RunState::kPreempting && !run.killed)
        timeout = std::min(timeout, std::max(0, static_cast<int>((run.kill_at - Now()) * 1000) + 1));
    }
    // Open control connections: their deadlines (ControlSocket never waits on a client); the
    // runs' supervisors being asked: theirs.
    if (int ctl = control_.NextWakeMs(); ctl >= 0) timeout = std::min(timeout, ctl);
    for (const RunCall& c : run_calls_) timeout = std::min(timeout, c.call->NextWakeMs());
    std::vector<struct pollfd> fds = {{opts_.signal_fd, POLLIN, 0}, {inotify_fd_, POLLIN, 0}};
    for (int fd : control_.PollFds()) fds.push_back({fd, POLLIN, 0});
    const size_t relays_from = fds.size();
    for (const auto& [name, relay] : relays_) fds.push_back({relay->fd(), POLLIN, 0});
    const size_t calls_from = fds.size();
    for (const RunCall& c : run_calls_) fds.push_back({c.call->fd(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), timeout);
    if (n < 0 && errno != EINTR) {
      spdlog::error("poll: {}", std::strerror(errno));
      return exit_code::kTransientFailure;
    }
    const auto ready = [&](size_t i) { return (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0; };
    bool output = false, client = control_.open_connections() > 0;
    for (size_t i = relays_from; i < calls_from; ++i) output = output || ready(i);
    for (size_t i = 2; i < relays_from; ++i) client = client || ready(i);
    if (output) PumpLogs("", /*at_exit=*/false);
    if (fds[0].revents & POLLIN) HandleSignals();
    // Besides inotify, the fallback re-read (a runs_dir where inotify is silent): every
    // kIdleWakeMs, however often clients wake the loop.
    if ((fds[1].revents & POLLIN) || Now() - last_scan_ >= kIdleWakeMs / 1000.0) {
      char buf[4096];
      while (::read(inotify_fd_, buf, sizeof(buf)) > 0) {}
      ScanRunsDir();
      last_scan_ = Now();
    }
    if (!run_calls_.empty()) PollRunCalls();
    if (client) control_.ServeWithPeer([this](const json& req, const ControlPeer& peer) { return Handle(req, peer); });
  }
  notifier_.Stopping();
  PumpLogs("", /*at_exit=*/true);
  relays_.clear();  // (a pipe still open is held by something a run left behind)
  spdlog::info("stopped; the queue is in {}", ServeLayout(cfg_.state_root).QueueJournal());
  return exit_code::kOk;
}

// ---- control socket --------------------------------------------------------------------

json ServeDaemon::Handle(const json& req, const ControlPeer& peer) {
  // A run's command by name: {"cmd": "run", "run": NAME, "action": COMMAND}.
  if (req.value("cmd", "") == "run") return RunCommand(req, peer);
  ParsedCommand parsed = CommandOf(req, kAnyScope);
  if (!parsed.command) return parsed.refusal;
  if (const ServeCommandHandler* h = HandlerOf(*parsed.command, kQueueScope)) return h->handle(*this, req, peer, nullptr);
  if (InfoOf(*parsed.command).scope & kServedRunScope)
    return ControlRefused("'" + std::string(InfoOf(*parsed.command).name) + "' is a run's command: send it as "
                          "{\"cmd\": \"run\", \"run\": NAME, \"action\": ...}");
  return ControlRefused("unknown command '" + std::string(InfoOf(*parsed.command).name) + "' (" +
                        CommandNames(kQueueScope) + ", run)");
}

json ServeDaemon::Submit(const json& req, const ControlPeer& peer) {
  if (!req.contains("config") || !req["config"].is_string() || !req.contains("base_dir") || !req["base_dir"].is_string())
    return ControlRefused("submit needs \"config\" (the file's text) and \"base_dir\" (its folder)");
  long long priority = 0;
  if (req.contains("priority")) {
    const json& p = req["priority"];
    if (!p.is_number_integer()) return ControlRefused("refused: \"priority\" must be an integer");
    priority = p.is_number_unsigned() && p.get<uint64_t>() > static_cast<uint64_t>(kPriorityBound)
                   ? static_cast<long long>(kPriorityBound) + 1
                   : p.get<long long>();
  }
  if (std::string why = RefuseSubmitter(peer.uid); !why.empty()) return ControlRefused("refused: " + why);
  if (std::string why = RefusePriority(priority, IsAdmin(peer.uid), cfg_.limits); !why.empty())
    return ControlRefused("refused: " + why);
  Config cfg;
  std::vector<ConfigError> errors =
      ValidateServedRunConfig(req["config"].get<std::string>(), req["base_dir"].get<std::string>(), cfg_.state_root, &cfg);
  if (errors.empty()) errors = Admissible(cfg);
  std::string file = Normal(ServeLayout::SubmittedFile(cfg_.runs_dir, cfg.run_name));
  if (errors.empty() && Exists(file)) errors.push_back({"/run_name", file + " exists already"});
  if (!errors.empty()) {
    json list = json::array();
    for (const ConfigError& e : errors) list.push_back({{"pointer", e.pointer}, {"message", e.message}});
    return ControlRefused("refused: " + ErrorText(errors[0]), {{"errors", list}});
  }
  // Paths resolved against the submitter's folder: the file in runs_dir holds them absolute.
  StatusOr<std::string> effective = EffectiveConfigText(cfg);
  if (!effective.ok()) return ControlRefused(effective.status().ToString());
  std::string text = "// submitted with `ensemblectl submit` by uid " + std::to_string(peer.uid) + " from " +
                     req["base_dir"].get<std::string>() + "\n" + *effective;
  // A new file of the drop directory, written through descriptors (nothing there followed or
  // replaced). run_as "submitter": the daemon's, readable by the submitter's group only.
  gid_t group = static_cast<gid_t>(-1);
  if (run_as_.submitter) {
    StatusOr<Submitter> who = MapSubmitter(peer.uid, run_as_, SystemUsers());  // (refused above otherwise)
    if (!who.ok()) return ControlRefused("refused: " + who.status().message());
    group = who->credentials.gid;
  }
  if (Status s = PublishNew(cfg_.runs_dir, BaseName(file), text, run_as_.submitter ? 0640 : 0644, group); !s.ok())
    return ControlRefused("refused: " + s.message());
  ServedRun* run = AdmitFile(file, text, peer.uid, static_cast<int>(priority));
  if (run == nullptr) {
    const ServedRun& r = rejected_[file];
    return ControlRefused("refused: " + r.reason);
  }
  StartRuns();
  return ControlOk("submitted run " + run->name + " as " + file + " (" + RunStateName(run->state) + ")",
                   {{"run", run->name}, {"file", file}});
}

json ServeDaemon::Describe(const ServedRun& run) const {
  json j = {{"name", run.name}, {"state", RunStateName(run.state)}, {"file", run.file}, {"state_dir", run.state_dir},
            {"priority", run.priority}, {"uid", run.submitter}, {"reason", run.reason}};
  const Grant& g = HoldsGrant(run.state) ? run.grant : run.ask;
  j["gpus"] = g.gpus;
  j["gpu_count"] = g.gpu_count;  // > 0: a count's ask, not granted yet (its gpus are [])
  j["cpu_workers"] = g.cpu_workers;
  j["resources"] = DescribeGrant(g);
  j["granted"] = HoldsGrant(run.state);
  j["gpu_share_bytes"] = g.gpu_share_bytes;  // > 0: a share of each of its GPUs, not the GPUs whole
  j["preemptions"] = run.preemptions;
  if (!run.preempted_by.empty()) j["preempted_by"] = run.preempted_by;
  if (run.pid > 0) j["pid"] = run.pid;
  if (run.crashes > 0) j["crashes"] = run.crashes;
  if (!run.errors.empty()) {
    j["errors"] = json::array();
    for (const ConfigError& e : run.errors) j["errors"].push_back({{"pointer", e.pointer}, {"message", e.message}});
  }
  if (!run.state_dir.empty() && run.state != RunState::kRejected) {
    if (const RunProgress* p = ProgressOf(run)) {
      j["rounds_done"] = p->committed.size();
      j["members_done"] = p->finished ? 0 : p->done.size();
    }
    j["rounds"] = run.rounds;
    j["members"] = run.members;
    j["files_uid"] = *RunFiles(run).owner;  // whose files its state directory holds (HTTP reads them so)
  }
  return j;
}

const RunProgress* ServeDaemon::ProgressOf(const ServedRun& run) const {
  if (run.state_dir.empty() || run.state == RunState::kRejected) return nullptr;
  const FileCheck check = RunFiles(run);
  const std::string key = PlainPath(run.state_dir) + "\n" + std::to_string(*check.owner);
  auto [at, added] = journals_.try_emplace(key, RunLayout(run.state_dir).JournalFile(), check);
  Status s = at->second.Update();
  if (!s.ok()) {  // none yet, or not the run's (a link, a FIFO, another's file): not read
    if (s.code() != Status::Code::kNotFound) spdlog::debug("run {}: {}", run.name, s.ToString());
    return nullptr;
  }
  return &at->second.progress();
}

json ServeDaemon::List() const {
  std::vector<const ServedRun*> order;
  for (const auto& [name, run] : runs_) order.push_back(&run);
  std::sort(order.begin(), order.end(), [](const ServedRun* a, const ServedRun* b) { return a->seq < b->seq; });
  json runs = json::array();
  for (const ServedRun* r : order) runs.push_back(Describe(*r));
  for (const auto& [file, r] : rejected_) runs.push_back(Describe(r));
  return ControlOkWith({{"runs", runs}});
}

}  // namespace ens
