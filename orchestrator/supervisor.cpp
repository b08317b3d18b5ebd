#include "orchestrator/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <algorithm>
#include <filesystem>
#include <iterator>

#include "common/atomic_file.h"
#include "common/data_source.h"
#include "common/exit_codes.h"
#include "common/fault_injection.h"
#include "common/logging.h"
#include "common/npy_writer.h"
#include "common/seed.h"
#include "orchestrator/config_change.h"
#include "orchestrator/legacy_queues.h"
#include "orchestrator/nvml.h"
#include "orchestrator/script_model_check.h"
#include "orchestrator/slurm_executor.h"
#include "orchestrator/transport.h"
#include "orchestrator/ensemble_summary.h"
#include "orchestrator/mutation_policy.h"
#include "orchestrator/pack_plan.h"
#include "orchestrator/pack_scheduler.h"

namespace ens {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Rows of a training file are streamed into the segment in chunks of about this size.
constexpr size_t kLoadChunkBytes = size_t{8} << 20;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Supervisor::Supervisor(Config config, SupervisorOptions opts)
    : cfg_(std::move(config)), opts_(std::move(opts)), layout_(cfg_.state_dir) {}

Supervisor::~Supervisor() {
  if (workers_) workers_->Shutdown(5);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Status Supervisor::Prepare() {
  Status s = MakeDirs(layout_.root());
  if (!s.ok()) return s;
  std::string abs = std::filesystem::absolute(layout_.root()).lexically_normal().string();
  run_id_ = RunIdFor(abs);
  lock_fd_ = ::open(layout_.LockFile().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return Status::FromErrno("open " + layout_.LockFile(), errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return Status::InvalidArgument(layout_.root() + ": another ensembled is running on this state_dir");
  auto j = Journal::Open(layout_.JournalFile());
  if (!j.ok()) return j.status();
  journal_ = std::move(*j);
  if (journal_->torn_lines_dropped() > 0)
    spdlog::warn("{}: dropped a torn last line left by a crash", layout_.JournalFile());
  progress_ = ReplayJournal(journal_->records());
  if (!progress_.started) {
    s = PublishFreshData();
  } else {
    s = CheckConfigOnResume();
    if (s.ok()) s = ReopenData(progress_);
  }
  if (!s.ok()) return s;
  return CheckScriptMembers();
}

// The TorchScript members' modules against the data's width and the run's outputs, before any
// task: a wrong file is one clear error at its config pointer, not a failure per member and
// attempt. Local workers only: a Slurm node reports the same error from its worker.
Status Supervisor::CheckScriptMembers() const {
  if (cfg_.resources.executor != ExecutorKind::kLocal) return Status::Ok();
  auto errors = CheckScriptModels(cfg_.members, static_cast<int>(train_->header().features),
                                  RequiredOutputs(cfg_, classes_.size(), holdout_.targets), opts_.worker_binary);
  if (errors.empty()) return Status::Ok();
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n") + opts_.config_path + ": " + e.pointer + ": " + e.message;
  return Status::InvalidArgument(msg);
}

Status Supervisor::CheckConfigOnResume() {
  const json now = ConfigToJson(cfg_);
  const std::string path = layout_.ConfigFile();
  auto rec = ReadRecordedConfig(path);
  if (!rec.ok() && rec.status().code() != Status::Code::kNotFound) return rec.status();
  if (!rec.ok()) {
    spdlog::warn("{}: no recorded config (the run was started by an older ensembled); recording this one", path);
    return WriteRecordedConfig(path, RecordedConfig{0, 0, "", now});
  }
  RecordedConfig r = std::move(*rec);
  const int recorded_epoch = r.epoch;
  // An accepted change whose record was not rewritten before a crash: the journal has it.
  for (const json& e : journal_->records())
    if (e.value("event", "") == "config_changed" && e.value("epoch", 0) > r.epoch &&
        e.value("fingerprint", "") == ConfigFingerprint(now)) {
      r.epoch = e.value("epoch", 0);
      r.from_round = e.value("from_round", 0);
      r.config = now;
    }
  std::vector<ConfigChange> changes = DiffConfigs(r.config, now);
  std::vector<ConfigChange> results = ResultsChanging(changes);
  if (!results.empty()) {
    const int round = progress_.next_round;
    if (!opts_.accept_config_change) {
      std::string msg = layout_.root() + ": the config differs from the one this run uses (config epoch " +
                        std::to_string(r.epoch) + ", " + path + ") in keys that change results:";
      for (const auto& c : results) msg += "\n  " + DescribeChange(c);
      msg += "\nTo keep the recorded config, undo these changes. To use them: start a new run with another "
             "state_dir, or run `ensembled run --accept-config-change` to start config epoch " +
             std::to_string(r.epoch + 1) + " at round " + std::to_string(round) +
             " (rounds before it keep their config).";
      return Status::InvalidArgument(msg);
    }
    json list = json::array();
    for (const auto& c : results) list.push_back(DescribeChange(c));
    r.epoch += 1;
    r.from_round = round;
    Status s = journal_->Append({{"event", "config_changed"}, {"epoch", r.epoch}, {"from_round", round},
                                 {"fingerprint", ConfigFingerprint(now)}, {"changes", list}});
    if (!s.ok()) return s;
    for (const auto& c : results) spdlog::warn("config epoch {} from round {}: {}", r.epoch, round, DescribeChange(c));
  }
  for (const auto& c : changes)
    if (c.rule && *c.rule != ChangeRule::kResults)
      spdlog::info("config change applied on resume: {}", DescribeChange(c));
  config_epoch_ = r.epoch;
  if (changes.empty() && r.epoch == recorded_epoch) return Status::Ok();
  r.config = now;
  return WriteRecordedConfig(path, r);
}

Status Supervisor::PublishFreshData() {
  Status s = MakeDirs(layout_.DataDir());
  if (!s.ok()) return s;
  // Train rows go straight from the file into the segment, a chunk at a time: the supervisor
  // never holds the training table (peak: holdout + pool + a few chunks of kLoadChunkBytes).
  std::unique_ptr<DatasetWriter> writer;
  // An npy y of several columns: the check validate-config makes of target_columns, at the
  // first chunk, before the file is streamed.
  const std::string targets_from = "data " + (cfg_.data.source == DataSource::kNpy ? cfg_.data.y_path : cfg_.data.train_path);
  auto add = [&](const Table& chunk) {
    if (!writer) {
      if (std::string why = TargetCountProblem(cfg_, chunk.targets, targets_from); !why.empty())
        return Status::InvalidArgument(why);
      auto w = DatasetWriter::Begin(RunLayout::TrainSegment(layout_.DataDir()), chunk.features, 0, 0, chunk.targets);
      if (!w.ok()) return w.status();
      writer = std::move(*w);
    }
    return writer->AddRows(chunk);
  };
  uint64_t train_rows = 0;
  auto data = StreamRunData(cfg_.data, cfg_.run_seed, kLoadChunkBytes, add, &train_rows, cfg_.task);
  if (!data.ok()) return data.status();
  RunData& d = *data;
  if (!d.classes.empty()) {
    auto classes = ClassList::FromLabels(d.classes, "data");
    if (!classes.ok()) return classes.status();
    classes_ = std::move(*classes);
  }
  if (!writer) return Status::InvalidArgument("data: no training rows");
  s = writer->Commit();
  if (!s.ok()) return s;
  for (auto* t : {&d.holdout, &d.pool}) t->features = d.train.features, t->targets = d.train.targets;
  auto holdout = DatasetWriter::Create(RunLayout::HoldoutSegment(layout_.DataDir()), d.holdout, 0);
  if (!holdout.ok()) return holdout.status();
  auto pool = DatasetWriter::Create(RunLayout::PoolSegment(layout_.DataDir()), d.pool, 0);
  if (!pool.ok()) return pool.status();
  train_ = std::move(writer);
  holdout_ = std::move(d.holdout);
  pool_ = std::move(d.pool);
  pool_used_.assign(pool_.rows(), false);
  s = PublishFeatureFiles();
  if (!s.ok()) return s;
  json run = {{"run_id", run_id_}, {"run_name", cfg_.run_name}, {"features", d.train.features},
              {"feature_names", d.train.feature_names}, {"target_name", d.train.target_names[0]},
              {"holdout_rows", holdout_.rows()}, {"pool_rows", pool_.rows()}};
  if (!classes_.empty()) run.update({{"task", Name(cfg_.task)}, {"classes", classes_.ToJson()}});
  if (d.train.targets > 1) run.update({{"targets", d.train.targets}, {"target_names", d.train.target_names}});
  s = WriteFileAtomic(layout_.RunFile(), run.dump(2) + "\n");
  if (!s.ok()) return s;
  progress_.train_rows = train_rows;
  const json normalised = ConfigToJson(cfg_);
  s = WriteRecordedConfig(layout_.ConfigFile(), RecordedConfig{0, 0, "", normalised});
  if (!s.ok()) return s;
  return journal_->Append({{"event", "run_started"}, {"config_fingerprint", ConfigFingerprint(normalised)},
                           {"features", d.train.features},
                           {"train_rows", train_rows}, {"holdout_rows", holdout_.rows()},
                           {"pool_rows", pool_.rows()}});
}

Status Supervisor::PublishFeatureFiles() const {
  for (auto [path, table] : {std::pair{RunLayout::HoldoutFeatures(layout_.DataDir()), &holdout_},
                             std::pair{RunLayout::PoolFeatures(layout_.DataDir()), &pool_}}) {
    if (std::filesystem::exists(path)) continue;  // written once; the tables never change
    const uint64_t f = static_cast<uint64_t>(table->features);
    Status s = WriteNpyFloat32(path + ".tmp", table->x.data(), table->rows(), f, f, /*durable=*/true);
    if (s.ok() && ::rename((path + ".tmp").c_str(), path.c_str()) != 0)
      s = Status::FromErrno("rename " + path + ".tmp", errno);
    if (s.ok()) s = FsyncDir(layout_.DataDir());
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status Supervisor::ReopenData(const RunProgress& p) {
  auto train = DatasetWriter::Open(RunLayout::TrainSegment(layout_.DataDir()));
  if (!train.ok()) return train.status();
  train_ = std::move(*train);
  // Rows appended by a mutation whose round never committed are rolled back; the mutation
  // is then decided again, identically, and applied exactly once.
  if (train_->header().rows != p.train_rows || train_->header().generation != p.generation) {
    spdlog::info("rolling {} back to generation {} ({} rows)", train_->path(), p.generation, p.train_rows);
    Status s = train_->Rollback(p.train_rows, p.generation);
    if (!s.ok()) return s;
  }
  for (auto [path, table] : {std::pair{RunLayout::HoldoutSegment(layout_.DataDir()), &holdout_},
                             std::pair{RunLayout::PoolSegment(layout_.DataDir()), &pool_}}) {
    auto w = DatasetWriter::Open(path);
    if (!w.ok()) return w.status();
    auto t = (*w)->Read(0, (*w)->header().rows);
    if (!t.ok()) return t.status();
    *table = std::move(*t);
  }
  Status s = PublishFeatureFiles();  // a run started before they existed gets them now
  if (!s.ok()) return s;
  if (cfg_.task == TaskKind::kClassification) {  // the class list is the run's, fixed at its start
    auto text = ReadFile(layout_.RunFile());
    if (!text.ok()) return text.status();
    json run = json::parse(*text, nullptr, false);
    if (!run.is_object() || !run.contains("classes"))
      return Status::InvalidArgument(layout_.RunFile() + ": no \"classes\": this run was not started as a classification run");
    auto classes = ClassList::FromJson(run["classes"], layout_.RunFile());
    if (!classes.ok()) return classes.status();
    classes_ = std::move(*classes);
  }
  pool_used_.assign(pool_.rows(), false);
  for (uint64_t id : p.pool_used)
    if (id < pool_used_.size()) pool_used_[id] = true;
  if (!p.committed.empty()) excluded_file_ = p.committed.back().value("excluded_file", "");
  if (!excluded_file_.empty()) {
    auto bytes = ReadFile(excluded_file_);
    if (!bytes.ok()) return bytes.status();
    excluded_.resize(bytes->size() / sizeof(uint64_t));
    std::memcpy(excluded_.data(), bytes->data(), excluded_.size() * sizeof(uint64_t));
    std::sort(excluded_.begin(), excluded_.end());  // files of earlier versions may repeat ids
    excluded_.erase(std::unique(excluded_.begin(), excluded_.end()), excluded_.end());
  }
  spdlog::info("resuming {} at round {} (generation {}, {} train rows, {} members already done)",
               layout_.root(), p.next_round, p.generation, p.train_rows, p.done.size());
  return Status::Ok();
}

TaskSpec Supervisor::MakeTask(int round, int index, int attempt) const {
  TaskSpec t;
  const MemberSpec& m = cfg_.members[index];
  t.task_id = "r" + std::to_string(round) + "-" + m.name;
  t.round = round;
  t.member_index = index;
  t.seed = MemberSeed(cfg_.run_seed, static_cast<uint64_t>(index) + m.seed_offset, round);
  t.generation = progress_.generation;
  t.rows = progress_.train_rows;
  t.data_dir = std::filesystem::absolute(layout_.DataDir()).string();
  t.out_dir = std::filesystem::absolute(layout_.MemberDir(round, m.name)).string();
  t.excluded_file = excluded_file_;
  t.attempt = attempt;
  t.threads = cfg_.resources.threads_per_worker;
  t.classes = classes_.size();
  t.save_checkpoint = cfg_.save_checkpoints;
  t.member = m;
  // A warm start reads the member's state of the round before, which committed before this
  // round began: whether it is there is settled, and recorded in the task (verify, resume).
  if (m.warm_start && round > 0) {
    const std::string state = MemberFiles(std::filesystem::absolute(layout_.MemberDir(round - 1, m.name)).string()).TrainState();
    if (std::filesystem::exists(state)) t.warm_from = state;
  }
  return t;
}

bool Supervisor::HandleSignals() {
  if (opts_.signal_fd < 0) return true;
  struct signalfd_siginfo si;
  while (::read(opts_.signal_fd, &si, sizeof(si)) == sizeof(si)) {
    if (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM) RequestStop("signal " + std::to_string(si.ssi_signo));
  }
  return stop_requests_ < 2;
}

Supervisor::RoundEnd Supervisor::RunRound(int round, Status* error) {
  // The dispatch unit is a pack (a single member when packing is off). A member's bits do not
  // depend on its pack, so the plan may follow the worker count. Where each pack is (queued, in
  // flight, retried, draining, done) and which members are decided: PackScheduler.
  std::vector<bool> done_before(cfg_.members.size());
  for (size_t i = 0; i < cfg_.members.size(); ++i) done_before[i] = progress_.done.count(cfg_.members[i].name) > 0;
  auto plan = PackScheduler::Create(
      PlanPacks(cfg_.members, cfg_.pack_size, static_cast<int>(workers_->slots().size()),
                PackShape{static_cast<int>(train_->header().features), progress_.train_rows}),
      cfg_.members.size(), done_before, cfg_.max_task_attempts);
  if (!plan.ok()) {
    *error = plan.status();
    return RoundEnd::kFailed;
  }
  PackScheduler& sched = *plan;
  std::string first_failure;
  // member_done records wait here until their pack has reported (or 1 s passed) and go to
  // the journal as one fsync'd batch: O(1) fsyncs per pack, not per member.
  struct DoneRecord {
    json rec;
    std::string out_dir;
    int pack;
  };
  std::vector<DoneRecord> done_batch;
  Clock::time_point batch_started;
  auto flush_done = [&]() -> Status {
    if (done_batch.empty()) return Status::Ok();
    std::vector<json> recs;
    for (const auto& d : done_batch) recs.push_back(d.rec);
    Status s = journal_->AppendBatch(std::move(recs));
    if (!s.ok()) return s;
    for (const auto& d : done_batch) {
      const json& m = d.rec["metrics"];
      const std::string name = d.rec["member"].get<std::string>();
      progress_.done[name] = d.rec;
      CrashPoint("after_member_done");
      RecordFinished(name, d.out_dir, m.value("seconds", 0.0));
      const bool classifier = m.contains("holdout_accuracy");
      std::printf("  round %d  %-8s done   %s %7.4f  epochs %3d  %5.1fs  slot %d pid %d\n", round, name.c_str(),
                  classifier ? "holdout_accuracy" : "holdout_rmse",
                  m.value(classifier ? "holdout_accuracy" : "holdout_rmse", 0.0), m.value("epochs_run", 0),
                  m.value("seconds", 0.0), d.rec.value("slot", 0), d.rec.value("pid", 0));
    }
    std::fflush(stdout);
    done_batch.clear();
    return Status::Ok();
  };
  // A stop journals what finished first. When that fails, the stop is a failure that a restart
  // mends: exit_code::kTransientFailure, naming the members whose results are not recorded
  // (their directories are written; the resumed run retrains them to the same bits).
  auto stopped = [&]() {
    const size_t unrecorded = done_batch.size();
    if (Status s = flush_done(); !s.ok()) {
      *error = Status::IOError("stopping in round " + std::to_string(round) + ": cannot journal " +
                               std::to_string(unrecorded) + " finished member(s) (" + s.message() +
                               "); their results are not recorded: the resumed run trains them again");
      return RoundEnd::kFailed;
    }
    return RoundEnd::kStopped;
  };
  // Every member decided, and every done one journaled.
  while (!sched.Complete() || !done_batch.empty()) {
    if (stop_requests_ > 0 && !sched.stopping()) sched.RequestStop();  // nothing new starts
    // A retry waits until every task of the pack's previous attempt has reported (done, failed
    // or lost): only then is it known which members are journaled. A re-run pack trains only
    // its undecided members: a member's bits do not depend on its pack, and a journaled
    // directory is never rewritten.
    if (!paused_)
      while (std::optional<PackDispatch> next = sched.NextDispatch()) {
        if (workers_->IdleCount() == 0) break;  // spares building a pack's tasks for nothing
        std::vector<TaskSpec> tasks;
        for (int i : next->members) tasks.push_back(MakeTask(round, i, next->attempt));
        if (!workers_->Assign(tasks)) break;
        if (Status s = sched.Dispatched(next->pack); !s.ok()) {
          spdlog::error("round {}: {}", round, s.message());
          break;
        }
        CrashPoint("after_dispatch");
      }
    if (stop_requests_ > 0 && workers_->BusyCount() == 0) return stopped();
    if (stop_requests_ > 0 && Clock::now() > stop_deadline_) {
      spdlog::warn("stop_timeout_s passed: stopping the running tasks");
      return stopped();
    }
    struct pollfd fds[3] = {{workers_->report_fd(), POLLIN, 0}, {control_.fd(), POLLIN, 0}, {opts_.signal_fd, POLLIN, 0}};
    ::poll(fds, opts_.signal_fd >= 0 ? 3 : 2, 200);
    if (!HandleSignals()) return stopped();
    round_failed_ = sched.failed_count();
    ServiceTick(false);
    std::vector<PoolEvent> events = workers_->Service();
    if (std::string why = workers_->Unusable(); !why.empty()) {  // a restart cannot help
      *error = Status::InvalidArgument(why);
      return RoundEnd::kFailed;
    }
    for (PoolEvent& e : events) {
      // A late report about an earlier round's task must not count in this one.
      if (e.task.round != round) continue;
      // (Every task the supervisor sends is published: MakeTask never clears `publish`.)
      const std::string& name = e.task.member.name;
      const int index = e.task.member_index;
      json metrics;
      if (e.kind == PoolEvent::kDone && !sched.decided(index)) {
        auto r = LoadMemberResult(e.task.out_dir, holdout_.rows() * PredictionWidth(), pool_.rows() * PredictionWidth());
        if (r.ok()) {
          metrics = r->metrics;
        } else {
          e.kind = PoolEvent::kFailed;
          e.error = "results unreadable: " + r.status().message();
        }
      }
      MemberReport report;
      report.kind = e.kind == PoolEvent::kDone     ? MemberReport::kDone
                    : e.kind == PoolEvent::kFailed ? MemberReport::kFailed
                                                   : MemberReport::kLost;
      report.member = index;
      report.attempt = e.task.attempt;
      report.permanent = e.permanent;
      report.killed_unasked = e.killed_unasked;
      const ReportVerdict v = sched.OnReport(report);
      if (!v.status.ok()) spdlog::error("round {}: {}", round, v.status.message());
      if (v.outcome == ReportVerdict::kIgnored) continue;
      const int pack = sched.pack_of(index);
      if (v.outcome == ReportVerdict::kDone) {
        if (done_batch.empty()) batch_started = Clock::now();
        done_batch.push_back({{{"event", "member_done"}, {"round", round}, {"member", name}, {"index", index},
                               {"attempt", e.task.attempt}, {"slot", e.slot}, {"pid", e.pid}, {"metrics", metrics}},
                              e.task.out_dir, pack});
        continue;
      }
      if (v.out_of_memory) {
        // Killed by a SIGKILL ensembled did not send in every attempt: most likely the kernel's
        // out-of-memory killer, and then a restart cannot help (exit 78, not a restart loop).
        const size_t size = sched.pack_size(pack);
        e.error += "; killed by SIGKILL in all " + std::to_string(e.task.attempt) +
                   " attempts, not by ensembled: most likely the kernel's out-of-memory killer (" +
                   (size > 1 ? "pack of " + std::to_string(size) +
                                   "; a smaller pack_size or fewer workers per machine may fit)"
                             : "alone; fewer workers per machine may fit)");
        e.permanent = true;
      }
      // As with member_done: a journal that cannot take a record is not appended to again
      // (the write may have left part of a line); the round stops with its error.
      auto journal_failed = [&]() -> Status {
        Status s = journal_->Append({{"event", "member_failed"}, {"round", round}, {"member", name}, {"index", index},
                                     {"attempt", e.task.attempt}, {"error", e.error}, {"permanent", e.permanent}});
        if (!s.ok()) {
          spdlog::error("journal: cannot record round {} member {}'s failure", round, name);
          return s;
        }
        ++counters_.members_failed_total;
        return Status::Ok();
      };
      if (first_failure.empty() && (v.outcome == ReportVerdict::kPermanent || v.outcome == ReportVerdict::kGaveUp))
        first_failure = "member " + name + ": " + e.error;
      if (v.outcome == ReportVerdict::kPermanent) {
        // Deterministic (NaN loss, a spec that cannot build): retrying cannot help, and it is
        // this member's own failure; its pack-mates report for themselves.
        spdlog::warn("round {} member {} attempt {} failed: {} (permanent, not retried)", round, name,
                     e.task.attempt, e.error);
        if (Status s = journal_failed(); !s.ok()) {
          *error = s;
          return RoundEnd::kFailed;
        }
        continue;
      }
      const bool give_up = v.outcome == ReportVerdict::kGaveUp;
      spdlog::warn("round {} member {} attempt {} failed: {}{}", round, name, e.task.attempt, e.error,
                   give_up ? " (giving up)" : " (will retry)");
      if (!give_up) {  // the pack again, less its decided members
        ++counters_.members_retried_total;
        continue;
      }
      // Out of attempts: this member fails. Its pack-mates' own reports of this last attempt
      // (done, failed or lost; every task of a pack gets one) decide theirs.
      if (Status s = journal_failed(); !s.ok()) {
        *error = s;
        return RoundEnd::kFailed;
      }
    }
    const bool pack_reported = std::any_of(done_batch.begin(), done_batch.end(),
                                           [&](const DoneRecord& d) { return sched.reports_owed(d.pack) == 0; });
    if (!done_batch.empty() && (pack_reported || Clock::now() - batch_started > std::chrono::seconds(1))) {
      if (Status s = flush_done(); !s.ok()) {
        *error = s;
        return RoundEnd::kFailed;
      }
    }
  }
  const size_t failed = sched.failed_count();
  const size_t finished = sched.done_count();
  size_t needed = cfg_.min_members > 0 ? static_cast<size_t>(cfg_.min_members) : cfg_.members.size();
  if (finished < needed) {
    // Retries exhausted on failures that were not permanent (crashes, I/O): a restart may help.
    auto make = sched.any_permanent() ? Status::InvalidArgument : Status::IOError;
    *error = make("round " + std::to_string(round) + ": " + std::to_string(failed) +
                                     " member(s) failed, " + std::to_string(finished) + " succeeded, " +
                                     std::to_string(needed) + " needed (min_members); first failure: " + first_failure);
    return RoundEnd::kFailed;
  }
  if (failed > 0)
    spdlog::warn("round {}: {} member(s) failed; continuing with {} (min_members {})", round, failed, finished, needed);
  return RoundEnd::kComplete;
}

Status Supervisor::CommitRound(int round, double wall_seconds, bool* stop_now) {
  std::vector<MemberResult> results;
  json members = json::array();
  for (const auto& m : cfg_.members) {
    if (!progress_.done.count(m.name)) continue;  // failed, and min_members allowed it
    auto r = LoadMemberResult(layout_.MemberDir(round, m.name), holdout_.rows() * PredictionWidth(), pool_.rows() * PredictionWidth());
    if (!r.ok()) return r.status();
    members.push_back(r->metrics);
    results.push_back(std::move(*r));
  }
  EnsembleSummary ens = SummariseEnsemble(results, holdout_.y, classes_.size(), Gaussian(), holdout_.targets);
  bool last = round + 1 >= cfg_.rounds.count;
  bool converged = cfg_.rounds.stop_below_error && ens.ensemble_error < *cfg_.rounds.stop_below_error;
  *stop_now = last || converged;
  const uint64_t trained_rows = progress_.training_rows();
  json summary = {{"round", round}, {"generation", progress_.generation}, {"train_rows", trained_rows},
                  {"ensemble", ens.ToJson()}, {"wall_seconds", wall_seconds}};
  AppliedMutation mut;
  Status s = DecideAndAppend(round, summary, results, *stop_now, &mut);
  if (!s.ok()) return s;
  summary["members"] = members;
  summary["mutation"] = {{"policy", Name(cfg_.mutation.policy)}, {"added", mut.added}, {"dropped", mut.dropped}};
  if (*stop_now) summary["mutation"]["skipped"] = "last round";
  s = WriteFileAtomic(layout_.SummaryFile(round), summary.dump(2) + "\n");
  if (!s.ok()) return s;
  CrashPoint("after_summary");
  json rec = {{"event", "round_committed"}, {"round", round}, {"trained_rows", trained_rows},
              {"generation", mut.generation}, {"train_rows", train_->header().rows},
              {"dropped_rows", mut.dropped_rows},
              {"pool_used", mut.pool_ids}, {"excluded_file", mut.excluded_file},
              {"summary", ens.ToJson()}, {"wall_seconds", wall_seconds}};
  // The last round decides no mutation; extending the run (config_change.h) decides it then.
  if (*stop_now) rec["mutation_skipped"] = true;
  s = journal_->Append(rec);
  if (!s.ok()) return s;
  CrashPoint("after_round_commit");
  progress_ = ReplayJournal(journal_->records());
  for (uint64_t id : mut.pool_ids) pool_used_[id] = true;
  excluded_file_ = mut.excluded_file;
  const auto rows_trained = static_cast<unsigned long long>(rec["trained_rows"].get<uint64_t>());
  std::string per_target;  // several targets: each one's ensemble RMSE, in target order
  for (size_t t = 0; t < ens.ensemble_rmse_per_target.size(); ++t)
    per_target += (t ? ", " : " (per target ") + fmt::format("{:.4f}", ens.ensemble_rmse_per_target[t]) +
                  (t + 1 == ens.ensemble_rmse_per_target.size() ? ")" : "");
  if (classes_.empty())
    std::printf("round %d committed: trained on %llu rows | member holdout RMSE %.4f ± %.4f | ensemble RMSE %.4f%s | "
                "+%zu rows | %.1fs\n",
                round, rows_trained, ens.member_rmse_mean, ens.member_rmse_std, ens.ensemble_rmse, per_target.c_str(),
                static_cast<size_t>(mut.added), wall_seconds);
  else
    std::printf("round %d committed: trained on %llu rows | member holdout accuracy %.4f ± %.4f | ensemble accuracy "
                "%.4f, NLL %.4f | +%zu rows | %.1fs\n",
                round, rows_trained, ens.member_accuracy_mean, ens.member_accuracy_std, ens.ensemble_accuracy,
                ens.ensemble_nll, static_cast<size_t>(mut.added), wall_seconds);
  std::fflush(stdout);
  if (converged) spdlog::info("ensemble error {:.4f} below stop_below_error: stopping", ens.ensemble_error);
  return Status::Ok();
}

Status Supervisor::DecideAndAppend(int round, const json& summary,
                                   const std::vector<MemberResult>& results, bool skip, AppliedMutation* out) {
  Mutation mut;
  mut.add.features = static_cast<int>(train_->header().features);
  mut.add.targets = static_cast<int>(TargetCount(train_->header()));
  if (!skip) {
    // A mutation command may run for minutes: keep pinging the watchdog, answering
    // ensemblectl and noting signals. One stop request is acted on after the commit (the
    // command gets until stop_timeout_s); a second abandons it (the round is committed again
    // on resume). A copy of the spec, because a reload served meanwhile may replace cfg_.
    auto on_wait = [this] {
      bool go_on = HandleSignals() && !(stop_requests_ > 0 && Clock::now() > stop_deadline_);
      ServiceTick(false);
      return go_on;
    };
    MutationContext ctx{round, cfg_.run_seed, &pool_, &pool_used_, &results, summary,
                        mut.add.features, train_->header().rows, on_wait, {}, classes_.empty() ? nullptr : &classes_,
                        Gaussian(), mut.add.targets};
    const MutationSpec spec = cfg_.mutation;
    if (spec.policy == MutationPolicyKind::kCommand) {  // the program sees the run: data, predictions, ensemblectl
      auto view = CommandMutationView(round, summary.value("generation", uint64_t{0}), results);
      if (!view.ok()) return view.status();
      ctx.round_summary["run"] = std::move(view->run);
      ctx.command_env = std::move(view->env);
    }
    auto m = DecideMutation(spec, ctx);
    if (!m.ok()) return m.status();
    mut = std::move(*m);
  }
  Table rows;
  rows.features = mut.add.features;
  rows.targets = mut.add.targets;
  for (uint64_t id : mut.pool_ids) rows.AppendRow(&pool_.x[id * pool_.features], pool_.TargetsOf(id));
  for (size_t r = 0; r < mut.add.rows(); ++r) rows.AppendRow(&mut.add.x[r * rows.features], mut.add.TargetsOf(r));
  out->generation = progress_.generation + 1;
  Status s = train_->Append(rows, out->generation);
  if (!s.ok()) return s;
  CrashPoint("after_mutation_append");
  out->excluded_file = excluded_file_;
  // excluded_ stays sorted and unique: a row dropped twice is dropped once, and its size is
  // the number of rows no member trains on.
  std::vector<uint64_t> merged;
  merged.reserve(excluded_.size() + mut.drop.size());
  std::set_union(excluded_.begin(), excluded_.end(), mut.drop.begin(), mut.drop.end(), std::back_inserter(merged));
  out->dropped = merged.size() - excluded_.size();
  if (out->dropped > 0) {
    excluded_ = std::move(merged);
    char name[64];
    std::snprintf(name, sizeof(name), "/excluded-g%04llu.u64", static_cast<unsigned long long>(out->generation));
    out->excluded_file = std::filesystem::absolute(layout_.DataDir() + name).string();
    s = WriteFileAtomic(out->excluded_file, std::string(reinterpret_cast<const char*>(excluded_.data()),
                                                        excluded_.size() * sizeof(uint64_t)));
    if (!s.ok()) return s;
  }
  out->pool_ids = mut.pool_ids;
  out->added = rows.rows();
  out->dropped_rows = excluded_.size();
  return Status::Ok();
}

StatusOr<MutationView> Supervisor::CommandMutationView(int round, uint64_t generation,
                                                      const std::vector<MemberResult>& results) const {
  MutationViewInputs in;
  in.state_dir = std::filesystem::absolute(layout_.root()).string();
  in.round_dir = std::filesystem::absolute(layout_.RoundDir(round)).string();
  in.data_dir = std::filesystem::absolute(layout_.DataDir()).string();
  in.round = round;
  in.generation = generation;
  in.table_rows = train_->header().rows;
  in.features = static_cast<int>(train_->header().features);
  in.targets = static_cast<int>(TargetCount(train_->header()));
  auto run = ReadFile(layout_.RunFile());
  if (!run.ok()) return run.status();
  json run_json = json::parse(*run, nullptr, false);
  if (run_json.is_object() && run_json.contains("feature_names") && run_json["feature_names"].is_array())
    for (const auto& n : run_json["feature_names"]) in.feature_names.push_back(n.is_string() ? n.get<std::string>() : "");
  in.classes = classes_.names();
  in.gaussian = Gaussian();
  in.dropped = &excluded_;
  in.pool_used = &pool_used_;
  for (const auto& r : results) {
    in.member_names.push_back(r.name);
    in.member_dirs.push_back(std::filesystem::absolute(layout_.MemberDir(round, r.name)).string());
  }
  in.ctl_binary = SelfDir() + "/ensemblectl";
  return WriteMutationView(in);
}

Status Supervisor::ApplyDeferredMutation() {
  const json& last = progress_.committed.back();
  const int round = last.value("round", 0);
  std::vector<MemberResult> results;
  for (const auto& m : cfg_.members) {
    const std::string dir = layout_.MemberDir(round, m.name);
    if (!std::filesystem::exists(dir)) continue;  // failed, and min_members allowed it
    auto r = LoadMemberResult(dir, holdout_.rows() * PredictionWidth(), pool_.rows() * PredictionWidth());
    if (!r.ok()) return r.status();
    results.push_back(std::move(*r));
  }
  EnsembleSummary ens = SummariseEnsemble(results, holdout_.y, classes_.size(), Gaussian(), holdout_.targets);
  // What round `round` would have handed its mutation had it not been the last round.
  json summary = {{"round", round}, {"generation", last.value("generation", uint64_t{1}) - 1},
                  {"train_rows", last.value("trained_rows", uint64_t{0})}, {"ensemble", ens.ToJson()},
                  {"wall_seconds", last.value("wall_seconds", 0.0)}};
  AppliedMutation mut;
  Status s = DecideAndAppend(round, summary, results, false, &mut);
  if (!s.ok()) return s;
  s = journal_->Append({{"event", "mutation_applied"}, {"round", round}, {"generation", mut.generation},
                        {"train_rows", train_->header().rows}, {"dropped_rows", mut.dropped_rows},
                        {"pool_used", mut.pool_ids},
                        {"excluded_file", mut.excluded_file}, {"added", mut.added}, {"dropped", mut.dropped}});
  if (!s.ok()) return s;
  progress_ = ReplayJournal(journal_->records());
  for (uint64_t id : mut.pool_ids) pool_used_[id] = true;
  excluded_file_ = mut.excluded_file;
  std::printf("round %d's mutation, skipped when it was the last round: +%zu rows\n", round,
              static_cast<size_t>(mut.added));
  std::fflush(stdout);
  return Status::Ok();
}

void Supervisor::PrintFinalTable() const {
  if (!classes_.empty()) {
    std::printf("\n%-6s %12s %32s %18s %12s %10s\n", "round", "train rows", "member holdout accuracy (mean±std)",
                "ensemble accuracy", "ensemble NLL", "wall (s)");
    for (const json& c : progress_.committed) {
      const json& s = c["summary"];
      std::printf("%-6d %12llu %23.4f ± %-7.4f %18.4f %12.4f %10.1f\n", c.value("round", 0),
                  static_cast<unsigned long long>(c.value("trained_rows", uint64_t{0})),
                  s.value("member_accuracy_mean", 0.0), s.value("member_accuracy_std", 0.0),
                  s.value("ensemble_accuracy", 0.0), s.value("ensemble_nll", 0.0), c.value("wall_seconds", 0.0));
    }
    std::fflush(stdout);
    return;
  }
  std::printf("\n%-6s %12s %28s %14s %10s\n", "round", "train rows", "member holdout RMSE (mean±std)",
              "ensemble RMSE", "wall (s)");
  for (const json& c : progress_.committed) {
    const json& s = c["summary"];
    std::printf("%-6d %12llu %19.4f ± %-7.4f %14.4f %10.1f\n", c.value("round", 0),
                static_cast<unsigned long long>(c.value("trained_rows", uint64_t{0})),
                s.value("member_rmse_mean", 0.0), s.value("member_rmse_std", 0.0), s.value("ensemble_rmse", 0.0),
                c.value("wall_seconds", 0.0));
  }
  std::fflush(stdout);
}

int Supervisor::Run() {
  Status s = Prepare();
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  if (progress_.finished && progress_.finish_reason == "all rounds done" && cfg_.rounds.count > progress_.next_round) {
    s = journal_->Append({{"event", "run_extended"}, {"from_rounds", progress_.next_round},
                          {"to_rounds", cfg_.rounds.count}});
    if (!s.ok()) {
      spdlog::error("{}", s.ToString());
      return exit_code::kTransientFailure;
    }
    progress_ = ReplayJournal(journal_->records());
    std::printf("extending the run in %s from %d to %d rounds\n", layout_.root().c_str(), progress_.next_round,
                cfg_.rounds.count);
  }
  if (progress_.finished) {
    notifier_.Ready();  // systemd (Type=notify) must not count a finished run as a failed start
    notifier_.Stopping();
    std::printf("run in %s already finished (%s)\n", layout_.root().c_str(), progress_.finish_reason.c_str());
    if (cfg_.rounds.count < progress_.next_round)
      std::printf("rounds.count is %d; the %d rounds committed stay as they are\n", cfg_.rounds.count,
                  progress_.next_round);
    PrintFinalTable();
    return exit_code::kOk;
  }
  // A crash between the last round's commit and run_finished: the run is in fact complete.
  bool converged_last = !progress_.committed.empty() && cfg_.rounds.stop_below_error &&
                        SummaryError(progress_.committed.back()["summary"]) < *cfg_.rounds.stop_below_error;
  if (progress_.started && (progress_.next_round >= cfg_.rounds.count || converged_last)) {
    if (progress_.next_round > cfg_.rounds.count)
      std::printf("rounds.count is %d but %d rounds are committed: the run finishes here; nothing committed is "
                  "removed\n", cfg_.rounds.count, progress_.next_round);
    s = journal_->Append({{"event", "run_finished"}, {"rounds", progress_.next_round},
                          {"reason", converged_last ? "stop_below_error reached" : "all rounds done"}});
    if (!s.ok()) spdlog::error("{}", s.ToString());
    notifier_.Ready();
    notifier_.Stopping();
    PrintFinalTable();
    return s.ok() ? exit_code::kOk : exit_code::kTransientFailure;
  }
  if (!progress_.committed.empty() && progress_.committed.back().value("mutation_skipped", false)) {
    s = ApplyDeferredMutation();
    if (!s.ok()) {
      spdlog::error("{}", s.ToString());
      return ExitCodeFor(s);
    }
  }
  if (LegacyQueueSweep old = ReclaimLegacyQueues(); !old.removed.empty())
    spdlog::info("removed {} message queue(s) that killed runs of an earlier ensembled left in /dev/mqueue "
                 "(nothing had them open; their RLIMIT_MSGQUEUE budget is free again)",
                 old.removed.size());
  if (cfg_.resources.executor == ExecutorKind::kSlurm) {
    std::vector<WorkerPlacement> placements;
    s = SetUpExecutor(&placements);
    if (s.ok()) return RunWith(placements);
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  std::string nvml_note;
  std::unique_ptr<Nvml> nvml = Nvml::Open(&nvml_note);
  GpuInventory inventory = DiscoverGpus(nvml.get());
  if (!nvml && inventory.source != "ENSEMBLED_GPU_COUNT") inventory.note = nvml_note;
  std::optional<std::string> inherited;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) inherited = v;
  StatusOr<std::vector<WorkerPlacement>> planned = std::vector<WorkerPlacement>{};
  if (cfg_.resources.gpus_mode == "none") {
    planned = PlanWorkers(cfg_.resources, UsableGpus{}, inventory);
  } else {
    StatusOr<UsableGpus> usable = ResolveUsable(inventory, inherited);
    planned = usable.ok() ? PlanWorkers(cfg_.resources, *usable, inventory)
                          : StatusOr<std::vector<WorkerPlacement>>(usable.status());
  }
  spdlog::info("GPUs: {}{}", DescribeInventory(inventory),
               inherited ? "; inherited CUDA_VISIBLE_DEVICES=" + *inherited : std::string());
  if (!planned.ok()) {
    spdlog::error("{}", planned.status().message());
    return exit_code::kPermanentFailure;
  }
  gpus_ = std::make_unique<GpuMonitor>(std::move(nvml), std::move(inventory));
  std::vector<WorkerPlacement> placements = *planned;
  s = SetUpExecutor(&placements);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  return RunWith(placements);
}

Status Supervisor::SetUpExecutor(std::vector<WorkerPlacement>* placements) {
  if (cfg_.resources.executor == ExecutorKind::kSlurm) {
    const SlurmSpec& sl = cfg_.resources.slurm;
    placements->clear();
    for (int i = 0; i < sl.workers; ++i) placements->push_back({i, ""});  // Slurm picks the GPUs
    if (!opts_.executor) {
      std::string host = sl.advertise_host;
      if (host.empty()) {
        char name[256] = {};
        ::gethostname(name, sizeof(name) - 1);
        host = name;
      }
      const std::string root = std::filesystem::absolute(layout_.root()).string();
      auto tcp = TcpTransport::Listen(sl.listen, sl.port, host, root + "/transport.secret");
      if (!tcp.ok()) return tcp.status();
      spdlog::info("workers connect to {} (Slurm jobs named ens-{})", (*tcp)->address(), run_id_);
      own_transport_ = std::move(*tcp);
      own_executor_ = std::make_unique<SlurmExecutor>(sl, cfg_.resources.threads_per_worker, root);
    }
  } else if (!opts_.executor) {
    own_executor_ = std::make_unique<LocalExecutor>();
    own_transport_ = std::make_unique<LocalTransport>();
  }
  executor_ = opts_.executor ? opts_.executor : own_executor_.get();
  transport_ = opts_.transport ? opts_.transport : own_transport_.get();
  if (!transport_) return Status::InvalidArgument("an injected executor needs an injected transport");
  return executor_->Prepare(run_id_);
}

int Supervisor::RunWith(const std::vector<WorkerPlacement>& placements) {
  Status s;
  workers_ = std::make_unique<WorkerPool>(
      executor_, transport_,
      PoolOptions{run_id_, opts_.worker_binary, cfg_.resources.threads_per_worker, cfg_.heartbeat_timeout_s,
                  std::min(5.0, cfg_.heartbeat_timeout_s), cfg_.recycle,
                  std::filesystem::absolute(layout_.DataDir()).string()},
      placements);
  s = workers_->Start();
  if (s.ok()) s = StartService();
  if (!s.ok()) {  // limits that can never fit the workers are permanent; anything else may pass
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  std::printf("ensembled: run '%s' in %s: %zu members, %d rounds, %zu %s workers\n", cfg_.run_name.c_str(),
              layout_.root().c_str(), cfg_.members.size(), cfg_.rounds.count, placements.size(),
              placements.empty() || placements[0].gpu.empty() ? "CPU" : "GPU");
  std::fflush(stdout);
  int code = exit_code::kOk;
  for (int round = progress_.next_round; round < cfg_.rounds.count; ++round) {
    auto t0 = Clock::now();
    current_round_ = round;  // the curves of the last round stay until this round's first member
    ServiceTick(true);
    Status err;
    RoundEnd end = RunRound(round, &err);
    if (end == RoundEnd::kStopped) {
      spdlog::warn("stopped in round {}; {} members of it are saved; run again to resume", round,
                   progress_.done.size());
      break;
    }
    if (end == RoundEnd::kFailed) {
      spdlog::error("{}", err.ToString());
      code = ExitCodeFor(err);
      break;
    }
    ApplyPendingReload();  // the round boundary: safe config changes apply from here on
    bool stop_now = false;
    s = CommitRound(round, Since(t0), &stop_now);
    if (s.code() == Status::Code::kCancelled) {  // a second SIGTERM/SIGINT during the mutation
      spdlog::warn("stopped while deciding round {}'s mutation ({}); its members are saved; run again to resume",
                   round, s.message());
      break;
    }
    if (!s.ok()) {
      spdlog::error("round {} commit: {}", round, s.ToString());
      code = ExitCodeFor(s);
      break;
    }
    if (stop_now) {
      // The round is committed; without run_finished a restart appends it (the resume path above).
      s = journal_->Append({{"event", "run_finished"}, {"rounds", round + 1},
                            {"reason", round + 1 >= cfg_.rounds.count ? "all rounds done" : "stop_below_error reached"}});
      if (!s.ok()) {
        spdlog::error("journal: cannot record run_finished after round {}: {}", round, s.ToString());
        code = ExitCodeFor(s);
      }
      break;
    }
  }
  notifier_.Ready();  // no-op if sent; a run that ends before every worker came up still started
  notifier_.Stopping();
  workers_->Shutdown(stop_requests_ > 1 ? 0 : 10);
  ServiceTick(true);
  workers_.reset();
  PrintFinalTable();
  return code;
}

}  // namespace ens
