// The supervisor's service side: control socket, sd_notify, status.json, HTTP snapshot.
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "common/base/atomic_file.h"
#include "common/base/env_vars.h"
#include "common/state/member_view.h"
#include "orchestrator/run/config_change.h"
#include "orchestrator/run/supervisor.h"

#include "common/ipc/control_protocol.h"
#include "common/state/run_layout.h"

namespace ens {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

Status Supervisor::StartService() {
  std::string path = ControlSocketPath(cfg_.service.control_socket, cfg_.run_name, layout_.root());
  // 0600, but for a run that `ensembled serve` started as its submitter (run_as "submitter"):
  // the daemon, another user, must connect too. It sets ENSEMBLED_CONTROL_SOCKET_MODE=0666 and
  // the socket is in the run's state directory, which only its submitter (and the daemon, by
  // CAP_DAC_READ_SEARCH) may enter.
  const char* mode = EnvVarValue(EnvVar::kControlSocketMode);
  Status s = control_.Listen(path, mode != nullptr && std::string(mode) == "0666" ? 0666 : 0600);
  if (!s.ok()) return s;
  if (cfg_.service.http_port > 0) {
    http_ = std::make_unique<HttpEndpoint>();
    AddRunRoutes(*http_, http_snapshot_);
    s = http_->Start(cfg_.service.http_bind, cfg_.service.http_port);
    if (!s.ok()) return s;
    spdlog::info("metrics and status page on http://{}:{}/", cfg_.service.http_bind, cfg_.service.http_port);
  }
  counters_.task_seconds_buckets.assign(counters_.task_seconds_bucket_bounds.size(), 0);
  return Status::Ok();
}

void Supervisor::RequestStop(const std::string& why) {
  ++stop_requests_;
  if (stop_requests_ == 1) {
    stop_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(cfg_.stop_timeout_s));
    spdlog::warn("stop requested ({}): no new tasks; running ones get {:.0f} s to finish (again to stop now)", why,
                 cfg_.stop_timeout_s);
    notifier_.Stopping();
  }
}

namespace {

// A member's loss curves from its history (its own file, or its pack's span); empty when it has none.
MemberCurve CurveOf(const std::string& dir) {
  MemberCurve curve;
  auto text = ReadMemberFile(MemberFiles(dir).History());
  std::istringstream hist(text.ok() ? *text : std::string());
  std::string line;
  while (std::getline(hist, line)) {
    json h = json::parse(line, nullptr, false);
    if (h.is_discarded()) break;
    curve.loss.push_back(h.value("loss", 0.0));
    if (h.contains("val_loss")) curve.val_loss.push_back(h.value("val_loss", 0.0));  // validation_split 0: none
  }
  return curve;
}

}  // namespace

void Supervisor::RecordFinished(const std::string& member, const std::string& dir, double seconds) {
  if (curves_round_ != current_round_) {  // first member of a new round: drop the last round's curves
    curves_.clear();
    curves_round_ = current_round_;
  }
  ++counters_.members_finished_total;
  counters_.task_seconds_sum += seconds;
  ++counters_.task_seconds_count;
  for (size_t i = 0; i < counters_.task_seconds_bucket_bounds.size(); ++i)
    if (seconds <= counters_.task_seconds_bucket_bounds[i]) ++counters_.task_seconds_buckets[i];
  if (curves_.size() >= kMaxCurves) return;  // the status page draws a round's first kMaxCurves
  curves_[member] = CurveOf(dir);
}

void Supervisor::CurvesOfLastCommittedRound() {
  if (curves_looked_back_ || !curves_.empty() || progress_.committed.empty()) return;
  curves_looked_back_ = true;
  const int round = progress_.committed.back().round;
  for (const MemberSpec& m : cfg_.members) {
    if (curves_.size() >= kMaxCurves) break;
    MemberCurve curve = CurveOf(layout_.MemberDir(round, m.name));
    if (!curve.loss.empty()) curves_[m.name] = std::move(curve);
  }
  curves_round_ = round;
}


RunSnapshot Supervisor::BuildSnapshot() const {
  RunSnapshot s = counters_;
  s.run_name = cfg_.run_name;
  s.pid = static_cast<int>(::getpid());
  s.control_socket = control_.path();
  s.paused = paused_;
  s.stopping = stop_requests_ > 0;
  s.finished = progress_.finished;
  s.finish_reason = progress_.finish_reason;
  s.round = current_round_;
  s.rounds = cfg_.rounds.count;
  s.members_total = static_cast<int>(cfg_.members.size());
  s.members_done = static_cast<int>(progress_.done.size());
  s.members_failed_round = static_cast<int>(round_failed_);
  s.dataset_rows = progress_.training_rows();
  s.dataset_generation = progress_.generation;
  s.config_epoch = config_epoch_;
  if (workers_) {
    s.members_running = workers_->BusyCount();
    s.bad_messages_total = static_cast<uint64_t>(workers_->bad_messages());
    s.worker_restarts_total = static_cast<uint64_t>(workers_->unplanned_restarts());
    for (const auto& w : workers_->slots()) {
      s.workers.push_back({w.placement.slot, w.placement.gpu.empty() ? "cpu" : w.placement.gpu, static_cast<int>(w.pid),
                           SlotStateName(w.state),
                           w.tasks.empty() ? "" : w.tasks[0].member.name + (w.tasks.size() > 1 ? "+" + std::to_string(w.tasks.size() - 1) : ""),
                           w.state == SlotState::kBusy ? std::string(Name(w.phase)) : "", w.rss_kb, w.gpu_reserved_mb,
                           w.tasks_done, w.spawns, w.recycles});
      s.worker_recycles_total += static_cast<uint64_t>(w.recycles);
    }
  }
  if (gpus_) AddGpuReadings(gpus_->Read(), &s);
  SetCommittedRounds(&s, progress_.committed);
  s.curves = curves_;
  s.curves_round = curves_round_;
  double per_member = 0;
  int timed = 0;
  for (const auto& [name, rec] : progress_.done) {
    per_member += rec.metrics.value("seconds", 0.0);
    ++timed;
  }
  size_t left = cfg_.members.size() - std::min(cfg_.members.size(), progress_.done.size() + round_failed_);
  size_t slots = workers_ ? std::max<size_t>(1, workers_->slots().size()) : 1;
  s.eta_round_s = timed ? per_member / timed * static_cast<double>(left) / static_cast<double>(slots) : -1;
  return s;
}

const std::vector<Supervisor::RunCommandHandler>& Supervisor::RunCommandHandlers() {
  static const std::vector<RunCommandHandler> handlers = {
      {ControlCommand::kStatus,
       [](Supervisor& run, const json&) { return ControlOkWith({{"status", SnapshotToJson(run.BuildSnapshot())}}); }},
      {ControlCommand::kStop,
       [](Supervisor& run, const json&) {
         run.RequestStop("ensemblectl stop");
         return ControlOk("stopping: no new tasks; running ones finish first");
       }},
      {ControlCommand::kPause,
       [](Supervisor& run, const json&) {
         run.paused_ = true;
         spdlog::info("paused by ensemblectl: no new tasks until resume");
         return ControlOk("paused at the next member boundary (running members finish)");
       }},
      {ControlCommand::kResume,
       [](Supervisor& run, const json&) {
         run.paused_ = false;
         spdlog::info("resumed by ensemblectl");
         return ControlOk("resumed");
       }},
      {ControlCommand::kReload, [](Supervisor& run, const json&) { return run.Reload(); }},
  };
  return handlers;
}

bool Supervisor::Serves(ControlCommand c) {
  for (const RunCommandHandler& h : RunCommandHandlers())
    if (h.command == c) return true;
  return false;
}

json Supervisor::HandleControl(const json& req) {
  ParsedCommand parsed = CommandOf(req, kRunScope);
  if (!parsed.command) return parsed.refusal;
  for (const RunCommandHandler& h : RunCommandHandlers())
    if (h.command == *parsed.command) return h.handle(*this, req);
  // A row in kRunScope without a handler here (control_protocol_test fails on it first).
  return ControlRefused("'" + std::string(InfoOf(*parsed.command).name) + "' is not served by this ensembled");
}

json Supervisor::Reload() {
  auto next = LoadConfigFile(opts_.config_path);
  if (!next.ok()) return ControlRefused(next.status().message());
  std::vector<ConfigChange> refused = RefusedByReload(DiffConfigs(cfg_, *next));
  if (!refused.empty()) {
    std::vector<std::string> pointers;
    std::string list;
    for (const auto& c : refused) {
      pointers.push_back(c.pointer);
      const bool restart = c.rule == ChangeRule::kRestart;
      list += "\n  " + DescribeChange(c) + (restart ? " (applies when ensembled restarts)" : "");
    }
    return ControlRefused("a live reload applies only rounds, mutation.k/score/batch/timeout_s, timeouts, attempts, "
                          "min_members, recycle and retention; these changes need a restart (service, run_name, "
                          "state_dir, ...) or alter results (see `ensembled run --accept-config-change`):" + list,
                          {{"refused", pointers}});
  }
  pending_reload_ = std::move(*next);
  spdlog::info("config reload accepted; applies at the next round boundary");
  return ControlOk("accepted; applies at the next round boundary");
}

void Supervisor::ApplyPendingReload() {
  if (!pending_reload_) return;
  cfg_ = *pending_reload_;  // it differs from cfg_ only in kLive keys (RefusedByReload was empty)
  // The recorded config follows, so a restart compares against what the run uses now.
  auto rec = ReadRecordedConfig(layout_.ConfigFile());
  Status s = rec.ok() ? (rec->config = ConfigToJson(cfg_), WriteRecordedConfig(layout_.ConfigFile(), *rec)) : rec.status();
  // The reload applies all the same; a restart compares its config with the recorded one, which
  // is then the one before this reload.
  if (!s.ok()) spdlog::warn("config reload: the recorded config is not updated: {}", s.ToString());
  if (workers_) workers_->UpdateOptions(cfg_.heartbeat_timeout_s, cfg_.recycle);
  pending_reload_.reset();
  spdlog::info("config reload applied: {} rounds, mutation k {}", cfg_.rounds.count, cfg_.mutation.k);
}

void Supervisor::ServiceTick(bool force) {
  if (control_.fd() >= 0) control_.Serve([this](const json& r) { return HandleControl(r); });
  notifier_.MaybePingWatchdog();
  if (workers_ && !notifier_.ready_sent() && workers_->AllReady()) {
    notifier_.Ready();
    spdlog::info("all {} workers ready", workers_->slots().size());
  }
  auto now = Clock::now();
  if (gpus_) gpus_->MaybeSample(now, force);
  if (!force && now - last_status_write_ < std::chrono::seconds(1)) return;
  last_status_write_ = now;
  CurvesOfLastCommittedRound();
  RunSnapshot snap = BuildSnapshot();
  char status[160];
  std::snprintf(status, sizeof(status), "%s: %d/%d members done, %d running%s",
                RoundPosition(snap.round, snap.rounds).c_str(), snap.members_done, snap.members_total, snap.members_running,
                snap.paused ? " (paused)" : snap.stopping ? " (stopping)" : "");
  notifier_.Status(status);
  Status s = WriteFileReplace(layout_.StatusFile(), SnapshotToJson(snap).dump(2) + "\n");  // a live view
  if (!s.ok()) spdlog::warn("{}", s.ToString());
  if (http_) http_snapshot_.Publish(std::move(snap));
}

}  // namespace ens
