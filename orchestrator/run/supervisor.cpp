#include "orchestrator/run/supervisor.h"

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

#include "common/base/atomic_file.h"
#include "common/base/exit_codes.h"
#include "common/base/fault_injection.h"
#include "common/base/logging.h"
#include "common/state/member_view.h"
#include "common/base/seed.h"
#include "orchestrator/run/config_change.h"
#include "orchestrator/workers/legacy_queues.h"
#include "orchestrator/gpu/nvml.h"
#include "common/config/script_model_check.h"
#include "orchestrator/workers/executor_factory.h"
#include "orchestrator/run/ensemble_summary.h"
#include "orchestrator/run/mutation_policy.h"
#include "orchestrator/run/round_pruner.h"

namespace ens {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

Supervisor::Supervisor(Config config, SupervisorOptions opts)
    : cfg_(std::move(config)), opts_(std::move(opts)), layout_(cfg_.state_dir), data_(layout_) {}

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
    if (s.ok()) s = data_.Reopen(cfg_, progress_);
    if (s.ok())
      spdlog::info("resuming {} at round {} (generation {}, {} train rows, {} members already done)", layout_.root(),
                   progress_.next_round, progress_.generation, progress_.train_rows, progress_.done.size());
  }
  if (!s.ok()) return s;
  return CheckScriptMembers();
}

// The TorchScript members' modules against the data's width and the run's outputs, before any
// task: a wrong file is one clear error at its config pointer, not a failure per member and
// attempt. Local workers only: a Slurm node reports the same error from its worker.
Status Supervisor::CheckScriptMembers() const {
  if (cfg_.resources.executor != ExecutorKind::kLocal) return Status::Ok();
  auto errors = CheckScriptModels(cfg_.members, static_cast<int>(data_.train().header().features),
                                  Head().OutputWidth(), opts_.worker_binary);
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
  ApplyJournaledConfigChanges(&r, now);
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
    ConfigChangedRecord changed{r.epoch + 1, round, ConfigFingerprint(now), {}};
    for (const auto& c : results) changed.changes.push_back(DescribeChange(c));
    r.epoch = changed.epoch;
    r.from_round = round;
    json written;
    Status s = journal_->Append(changed, &written);
    if (!s.ok()) return s;
    progress_.Apply(written);
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

// An accepted change whose recorded config was not rewritten before a crash: the journal has it.
void Supervisor::ApplyJournaledConfigChanges(RecordedConfig* r, const json& now) const {
  for (const json& e : journal_->records()) {
    if (!IsRecord<ConfigChangedRecord>(e)) continue;
    const ConfigChangedRecord c = ConfigChangedFrom(e);
    if (c.epoch > r->epoch && c.fingerprint == ConfigFingerprint(now)) {
      r->epoch = c.epoch;
      r->from_round = c.from_round;
      r->config = now;
    }
  }
}

Status Supervisor::PublishFreshData() {
  RunStartedRecord started;
  Status s = data_.PublishFresh(cfg_, run_id_, &started);
  if (!s.ok()) return s;
  const json normalised = ConfigToJson(cfg_);
  s = WriteRecordedConfig(layout_.ConfigFile(), RecordedConfig{0, 0, "", normalised});
  if (!s.ok()) return s;
  started.config_fingerprint = ConfigFingerprint(normalised);
  json written;
  s = journal_->Append(started, &written);
  if (s.ok()) progress_.Apply(written);
  return s;
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
  t.excluded_file = data_.excluded_file();
  t.attempt = attempt;
  t.threads = cfg_.resources.threads_per_worker;
  t.classes = data_.classes().size();
  t.save_checkpoint = cfg_.save_checkpoints;
  t.pack_results = cfg_.pack_results;
  t.lane_predictions = true;
  t.member = m;
  // A warm start reads the member's state of the round before, which committed before this
  // round began: whether it is there is settled, and recorded in the task (verify, resume).
  if (m.warm_start && round > 0) {
    const std::string state = MemberFiles(std::filesystem::absolute(layout_.MemberDir(round - 1, m.name)).string()).TrainState();
    if (MemberFileExists(state)) t.warm_from = state;  // its own file, or its pack's span
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

RoundEnd Supervisor::RunRound(int round, Status* error) {
  RoundShape shape;
  shape.round = round;
  shape.features = static_cast<int>(data_.train().header().features);
  shape.train_rows = progress_.train_rows;
  shape.classes = Head().classes();
  shape.targets = Head().targets();
  shape.holdout_values = data_.holdout().rows() * PredictionWidth();
  shape.pool_values = data_.pool().rows() * PredictionWidth();
  for (const MemberSpec& m : cfg_.members) shape.done_before.push_back(progress_.done.count(m.name) > 0);
  RoundRunner runner(cfg_, std::move(shape), workers_.get(), journal_.get(), this);
  return runner.Run(error);
}

RoundHost::Stop Supervisor::StopState() const {
  if (stop_requests_ == 0) return Stop::kNone;
  return Clock::now() > stop_deadline_ ? Stop::kOverdue : Stop::kRequested;
}

bool Supervisor::Tick(size_t failed) {
  if (!HandleSignals()) return false;
  round_failed_ = failed;
  ServiceTick(false);
  return true;
}

void Supervisor::MemberJournaled(const MemberDoneRecord& record, const std::string& out_dir, MemberResult result) {
  progress_.done[record.member] = record;
  if (reported_round_ != record.round) reported_.clear();
  reported_round_ = record.round;
  reported_[record.member] = std::move(result);
  const json& m = record.metrics;
  RecordFinished(record.member, out_dir, m.value("seconds", 0.0));
  const char* score = Head().ScoreMetric();
  std::printf("  round %d  %-8s done   %s %7.4f  epochs %3d  %5.1fs  slot %d pid %d\n", record.round,
              record.member.c_str(), score, m.value(score, 0.0), m.value("epochs_run", 0),
              m.value("seconds", 0.0), record.slot, static_cast<int>(record.pid));
}

StatusOr<std::vector<MemberResult>> Supervisor::LoadRoundResults(int round, bool journaled_only) {
  std::vector<MemberResult> results;
  for (const auto& m : cfg_.members) {
    const std::string dir = layout_.MemberDir(round, m.name);
    // Failed, and min_members allowed it.
    if (journaled_only ? !progress_.done.count(m.name) : !MemberExists(dir)) continue;
    if (auto kept = reported_.find(m.name); reported_round_ == round && kept != reported_.end()) {
      results.push_back(std::move(kept->second));
      reported_.erase(kept);
      continue;
    }
    auto r = LoadMemberResult(dir, data_.holdout().rows() * PredictionWidth(), data_.pool().rows() * PredictionWidth());
    if (!r.ok()) return r.status();
    results.push_back(std::move(*r));
  }
  return results;
}

void Supervisor::MutationRecorded(const json& record, const AppliedMutation& mut) {
  progress_.Apply(record);
  data_.MarkCommitted(mut);
}

Status Supervisor::CommitRound(int round, double wall_seconds, bool* stop_now) {
  auto results = LoadRoundResults(round, /*journaled_only=*/true);
  if (!results.ok()) return results.status();
  json members = json::array();
  for (const MemberResult& r : *results) members.push_back(r.metrics);
  EnsembleSummary ens = SummariseEnsemble(*results, data_.holdout().y, Head());
  bool last = round + 1 >= cfg_.rounds.count;
  bool converged = cfg_.rounds.stop_below_error && ens.ensemble_error < *cfg_.rounds.stop_below_error;
  *stop_now = last || converged;
  const uint64_t trained_rows = progress_.training_rows();
  json summary = {{"round", round}, {"generation", progress_.generation}, {"train_rows", trained_rows},
                  {"ensemble", ens.ToJson()}, {"wall_seconds", wall_seconds}};
  AppliedMutation mut;
  Status s = DecideAndAppend(round, summary, *results, *stop_now, &mut);
  if (!s.ok()) return s;
  summary["members"] = members;
  summary["mutation"] = {{"policy", Name(cfg_.mutation.policy)}, {"added", mut.added}, {"dropped", mut.dropped}};
  if (*stop_now) summary["mutation"]["skipped"] = "last round";
  s = WriteFileAtomic(layout_.SummaryFile(round), summary.dump(2) + "\n");
  if (!s.ok()) return s;
  CrashPoint("after_summary");
  // The last round decides no mutation; extending the run (config_change.h) decides it then.
  json committed;
  s = journal_->Append(RoundCommittedRecord{round, trained_rows, mut.generation, data_.train().header().rows,
                                            mut.dropped_rows, mut.pool_ids, mut.excluded_file, ens.ToJson(),
                                            wall_seconds, *stop_now},
                       &committed);
  if (!s.ok()) return s;
  CrashPoint("after_round_commit");
  MutationRecorded(committed, mut);
  PrintCommitted(round, ens, trained_rows, mut.added, wall_seconds);
  if (converged) spdlog::info("ensemble error {:.4f} below stop_below_error: stopping", ens.ensemble_error);
  return Status::Ok();
}

void Supervisor::PrintCommitted(int round, const EnsembleSummary& ens, uint64_t trained_rows, uint64_t added,
                                double wall_seconds) const {
  const auto rows_trained = static_cast<unsigned long long>(trained_rows);
  std::string per_target;  // several targets: each one's ensemble RMSE, in target order
  for (size_t t = 0; t < ens.ensemble_rmse_per_target.size(); ++t)
    per_target += (t ? ", " : " (per target ") + fmt::format("{:.4f}", ens.ensemble_rmse_per_target[t]) +
                  (t + 1 == ens.ensemble_rmse_per_target.size() ? ")" : "");
  if (data_.classes().empty())
    std::printf("round %d committed: trained on %llu rows | member holdout RMSE %.4f ± %.4f | ensemble RMSE %.4f%s | "
                "+%zu rows | %.1fs\n",
                round, rows_trained, ens.member_rmse_mean, ens.member_rmse_std, ens.ensemble_rmse, per_target.c_str(),
                static_cast<size_t>(added), wall_seconds);
  else
    std::printf("round %d committed: trained on %llu rows | member holdout accuracy %.4f ± %.4f | ensemble accuracy "
                "%.4f, NLL %.4f | +%zu rows | %.1fs\n",
                round, rows_trained, ens.member_accuracy_mean, ens.member_accuracy_std, ens.ensemble_accuracy,
                ens.ensemble_nll, static_cast<size_t>(added), wall_seconds);
  std::fflush(stdout);
}

Status Supervisor::DecideAndAppend(int round, const json& summary,
                                   const std::vector<MemberResult>& results, bool skip, AppliedMutation* out) {
  const SegmentHeader& train = data_.train().header();
  Mutation mut;
  mut.add.features = static_cast<int>(train.features);
  mut.add.targets = static_cast<int>(TargetCount(train));
  if (!skip) {
    // A mutation command may run for minutes: keep pinging the watchdog, answering
    // ensemblectl and noting signals. One stop request is acted on after the commit (the
    // command gets until stop_timeout_s); a second abandons it (the round is committed again
    // on resume). A copy of the spec, because a reload served meanwhile may replace cfg_.
    auto on_wait = [this] {
      bool go_on = HandleSignals() && StopState() != Stop::kOverdue;
      ServiceTick(false);
      return go_on;
    };
    MutationContext ctx{round, cfg_.run_seed, &data_.pool(), &data_.pool_used(), &results, summary,
                        mut.add.features, train.rows, on_wait, {},
                        data_.classes().empty() ? nullptr : &data_.classes(), Head()};
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
  auto applied = data_.Append(mut, progress_.generation + 1);
  if (!applied.ok()) return applied.status();
  *out = std::move(*applied);
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
  in.table_rows = data_.train().header().rows;
  in.features = static_cast<int>(data_.train().header().features);
  in.targets = static_cast<int>(TargetCount(data_.train().header()));
  auto run = ReadFile(layout_.RunFile());
  if (!run.ok()) return run.status();
  json run_json = json::parse(*run, nullptr, false);
  if (run_json.is_object() && run_json.contains("feature_names") && run_json["feature_names"].is_array())
    for (const auto& n : run_json["feature_names"]) in.feature_names.push_back(n.is_string() ? n.get<std::string>() : "");
  in.classes = data_.classes().names();
  in.gaussian = Head().gaussian();
  in.dropped = &data_.excluded();
  in.pool_used = &data_.pool_used();
  for (const auto& r : results) {
    in.member_names.push_back(r.name);
    in.member_dirs.push_back(std::filesystem::absolute(layout_.MemberDir(round, r.name)).string());
  }
  in.ctl_binary = SelfDir() + "/ensemblectl";
  return WriteMutationView(in);
}

Status Supervisor::ApplyDeferredMutation() {
  const RoundCommittedRecord& last = progress_.committed.back();
  auto results = LoadRoundResults(last.round, /*journaled_only=*/false);
  if (!results.ok()) return results.status();
  EnsembleSummary ens = SummariseEnsemble(*results, data_.holdout().y, Head());
  // What round `round` would have handed its mutation had it not been the last round.
  // (A record of a journal too old to have "generation" reads 0: taken as 1, as before.)
  const uint64_t generation = std::max<uint64_t>(last.generation, 1) - 1;
  json summary = {{"round", last.round}, {"generation", generation}, {"train_rows", last.trained_rows},
                  {"ensemble", ens.ToJson()}, {"wall_seconds", last.wall_seconds}};
  AppliedMutation mut;
  Status s = DecideAndAppend(last.round, summary, *results, false, &mut);
  if (!s.ok()) return s;
  json applied;
  s = journal_->Append(MutationAppliedRecord{last.round, mut.generation, data_.train().header().rows,
                                             mut.dropped_rows, mut.pool_ids, mut.excluded_file, mut.added,
                                             mut.dropped},
                       &applied);
  if (!s.ok()) return s;
  MutationRecorded(applied, mut);
  std::printf("round %d's mutation, skipped when it was the last round: +%zu rows\n", last.round,
              static_cast<size_t>(mut.added));
  std::fflush(stdout);
  return Status::Ok();
}

void Supervisor::PrintFinalTable() const {
  if (!data_.classes().empty()) {
    std::printf("\n%-6s %12s %32s %18s %12s %10s\n", "round", "train rows", "member holdout accuracy (mean±std)",
                "ensemble accuracy", "ensemble NLL", "wall (s)");
    for (const RoundCommittedRecord& c : progress_.committed) {
      const json& s = c.summary;
      std::printf("%-6d %12llu %23.4f ± %-7.4f %18.4f %12.4f %10.1f\n", c.round,
                  static_cast<unsigned long long>(c.trained_rows), s.value("member_accuracy_mean", 0.0),
                  s.value("member_accuracy_std", 0.0), s.value("ensemble_accuracy", 0.0),
                  s.value("ensemble_nll", 0.0), c.wall_seconds);
    }
    std::fflush(stdout);
    return;
  }
  // The calibrated coverage of +-2 sigma (sigma_calibration.h) where the summary has it.
  std::printf("\n%-6s %12s %28s %14s %12s %10s\n", "round", "train rows", "member holdout RMSE (mean±std)",
              "ensemble RMSE", "cal. 2sd", "wall (s)");
  for (const RoundCommittedRecord& c : progress_.committed) {
    const json& s = c.summary;
    char cover[32] = "-";
    const std::optional<double> cal = RoundView::FromSummary(0, 0, s, 0).figure("calibrated_coverage_2sigma");
    if (cal) std::snprintf(cover, sizeof(cover), "%.3f", *cal);
    std::printf("%-6d %12llu %19.4f ± %-7.4f %14.4f %12s %10.1f\n", c.round,
                static_cast<unsigned long long>(c.trained_rows), s.value("member_rmse_mean", 0.0),
                s.value("member_rmse_std", 0.0), s.value("ensemble_rmse", 0.0), cover, c.wall_seconds);
  }
  std::fflush(stdout);
}

int Supervisor::Run() {
  Status s = Prepare();
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  if (std::optional<int> code = FinishedOrExtended()) return *code;
  if (!progress_.committed.empty() && progress_.committed.back().mutation_skipped) {
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
  std::vector<WorkerPlacement> placements;
  s = SetUpExecutor(&placements);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  return RunWith(placements);
}

std::optional<int> Supervisor::FinishedOrExtended() {
  if (progress_.finished && progress_.finish_reason == "all rounds done" && cfg_.rounds.count > progress_.next_round) {
    json extended;
    Status s = journal_->Append(RunExtendedRecord{progress_.next_round, cfg_.rounds.count}, &extended);
    if (!s.ok()) {
      spdlog::error("{}", s.ToString());
      return exit_code::kTransientFailure;
    }
    progress_.Apply(extended);
    std::printf("extending the run in %s from %d to %d rounds\n", layout_.root().c_str(), progress_.next_round,
                cfg_.rounds.count);
  }
  if (progress_.finished) {
    notifier_.Ready();  // systemd (Type=notify) must not count a finished run as a failed start
    notifier_.Stopping();
    std::printf("run in %s already finished (%s)\n", layout_.root().c_str(), progress_.finish_reason.c_str());
    ServiceTick(true);  // its status.json says so, with its last round's curves
    if (cfg_.rounds.count < progress_.next_round)
      std::printf("rounds.count is %d; the %d rounds committed stay as they are\n", cfg_.rounds.count,
                  progress_.next_round);
    PrintFinalTable();
    return exit_code::kOk;
  }
  // A crash between the last round's commit and run_finished: the run is in fact complete.
  bool converged_last = !progress_.committed.empty() && cfg_.rounds.stop_below_error &&
                        SummaryError(progress_.committed.back().summary) < *cfg_.rounds.stop_below_error;
  if (!progress_.started || (progress_.next_round < cfg_.rounds.count && !converged_last)) return std::nullopt;
  if (progress_.next_round > cfg_.rounds.count)
    std::printf("rounds.count is %d but %d rounds are committed: the run finishes here; nothing committed is "
                "removed\n", cfg_.rounds.count, progress_.next_round);
  Status s = journal_->Append(
      RunFinishedRecord{progress_.next_round, converged_last ? "stop_below_error reached" : "all rounds done"});
  if (!s.ok()) spdlog::error("{}", s.ToString());
  notifier_.Ready();
  notifier_.Stopping();
  PrintFinalTable();
  return s.ok() ? exit_code::kOk : exit_code::kTransientFailure;
}

StatusOr<std::vector<WorkerPlacement>> Supervisor::PlanLocalWorkers() {
  GpuDiscovery found = DiscoverThisProcess();
  StatusOr<std::vector<WorkerPlacement>> planned = std::vector<WorkerPlacement>{};
  if (cfg_.resources.gpus.none()) {
    planned = PlanWorkers(cfg_.resources, UsableGpus{}, found.inventory);
  } else {
    planned = found.usable.ok() ? PlanWorkers(cfg_.resources, *found.usable, found.inventory)
                                : StatusOr<std::vector<WorkerPlacement>>(found.usable.status());
  }
  spdlog::info("GPUs: {}{}", DescribeInventory(found.inventory),
               found.inherited ? "; inherited CUDA_VISIBLE_DEVICES=" + *found.inherited : std::string());
  if (planned.ok()) gpus_ = std::make_unique<GpuMonitor>(std::move(found.nvml), std::move(found.inventory));
  return planned;
}

Status Supervisor::SetUpExecutor(std::vector<WorkerPlacement>* placements) {
  auto setup = ens::SetUpExecutor({&cfg_, run_id_, std::filesystem::absolute(layout_.root()).string(),
                                   opts_.executor != nullptr, [this] { return PlanLocalWorkers(); }});
  if (!setup.ok()) return setup.status();
  *placements = std::move(setup->placements);
  own_executor_ = std::move(setup->executor);
  own_transport_ = std::move(setup->transport);
  executor_ = opts_.executor ? opts_.executor : own_executor_.get();
  transport_ = opts_.transport ? opts_.transport : own_transport_.get();
  if (!transport_) return Status::InvalidArgument("an injected executor needs an injected transport");
  return executor_->Prepare(run_id_);
}

int Supervisor::RunWith(const std::vector<WorkerPlacement>& placements) {
  workers_ = std::make_unique<WorkerPool>(
      executor_, transport_,
      PoolOptions{run_id_, opts_.worker_binary, cfg_.resources.threads_per_worker, cfg_.heartbeat_timeout_s,
                  std::min(5.0, cfg_.heartbeat_timeout_s), cfg_.recycle,
                  std::filesystem::absolute(layout_.DataDir()).string()},
      placements);
  Status s = workers_->Start();
  if (s.ok()) s = StartService();
  if (!s.ok()) {  // limits that can never fit the workers are permanent; anything else may pass
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  std::printf("ensembled: run '%s' in %s: %zu members, %d rounds, %zu %s workers\n", cfg_.run_name.c_str(),
              layout_.root().c_str(), cfg_.members.size(), cfg_.rounds.count, placements.size(),
              placements.empty() || placements[0].gpu.empty() ? "CPU" : "GPU");
  std::fflush(stdout);
  const int code = RunRounds();
  notifier_.Ready();  // no-op if sent; a run that ends before every worker came up still started
  notifier_.Stopping();
  workers_->Shutdown(stop_requests_ > 1 ? 0 : 10);
  ServiceTick(true);
  workers_.reset();
  PrintFinalTable();
  return code;
}

Status Supervisor::ApplyRetention(bool resuming) {
  auto r = PruneRounds(cfg_.retention, layout_, journal_.get(), &progress_, resuming);
  if (!r.ok()) return r.status();
  if (r->rounds_lowered > 0 || r->bytes_freed > 0)
    spdlog::info("retention: {} round(s) pruned to their records, {:.1f} MiB freed", r->rounds_lowered,
                 static_cast<double>(r->bytes_freed) / (1024.0 * 1024.0));
  return Status::Ok();
}

int Supervisor::RunRounds() {
  if (Status s = ApplyRetention(/*resuming=*/true); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return ExitCodeFor(s);
  }
  for (int round = progress_.next_round; round < cfg_.rounds.count; ++round) {
    auto t0 = Clock::now();
    current_round_ = round;  // the curves of the last round stay until this round's first member
    ServiceTick(true);
    Status err;
    RoundEnd end = RunRound(round, &err);
    if (end == RoundEnd::kStopped) {
      spdlog::warn("stopped in round {}; {} members of it are saved; run again to resume", round,
                   progress_.done.size());
      return exit_code::kOk;
    }
    if (end == RoundEnd::kFailed) {
      spdlog::error("{}", err.ToString());
      return ExitCodeFor(err);
    }
    ApplyPendingReload();  // the round boundary: safe config changes apply from here on
    bool stop_now = false;
    Status s = CommitRound(round, Since(t0), &stop_now);
    if (s.code() == Status::Code::kCancelled) {  // a second SIGTERM/SIGINT during the mutation
      spdlog::warn("stopped while deciding round {}'s mutation ({}); its members are saved; run again to resume",
                   round, s.message());
      return exit_code::kOk;
    }
    if (!s.ok()) {
      spdlog::error("round {} commit: {}", round, s.ToString());
      return ExitCodeFor(s);
    }
    s = ApplyRetention(/*resuming=*/false);
    if (!s.ok()) {
      spdlog::error("after round {}: {}", round, s.ToString());
      return ExitCodeFor(s);
    }
    if (stop_now) {
      // The round is committed; without run_finished a restart appends it (the resume path above).
      json finished;
      s = journal_->Append(RunFinishedRecord{
          round + 1, round + 1 >= cfg_.rounds.count ? "all rounds done" : "stop_below_error reached"}, &finished);
      if (!s.ok()) {
        spdlog::error("journal: cannot record run_finished after round {}: {}", round, s.ToString());
        return ExitCodeFor(s);
      }
      progress_.Apply(finished);
      ServiceTick(true);  // the last status.json says the run finished, and why
      break;
    }
  }
  return exit_code::kOk;
}

}  // namespace ens
