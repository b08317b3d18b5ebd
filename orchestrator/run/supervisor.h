// Supervisor: runs a whole closed loop for one config — the heart of `ensembled run`.
//
//   prepare: lock state_dir, open the journal, publish (or reopen and roll back) the dataset
//   loop over rounds: queue every member task not already done, hand tasks to idle workers,
//     collect reports, retry lost/failed tasks up to max_task_attempts, then summarise the
//     ensemble, decide the mutation, append the new rows (generation g+1) and commit the round
//     to the journal. A restarted supervisor replays the journal and continues where it stopped.
// Signals (SIGINT/SIGTERM) arrive through a signalfd: the first stops dispatching and lets
// running tasks finish, the second stops the workers at once. Either way the journal holds
// every finished member, so the next run resumes.
// The parts: DatasetStore (the published data), RoundRunner (one round's members, from dispatch
// to the journal), mutation_policy.h (what a round boundary adds or drops) and, in
// supervisor_service.cpp, what the run shows and hears (control socket, status, systemd).
// Single-threaded. Run() is called once.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/class_list.h"
#include "common/config/config.h"
#include "common/state/dataset_segment.h"
#include "common/state/journal.h"
#include "common/state/member_result.h"
#include "common/config/run_head.h"
#include "common/state/run_layout.h"
#include "common/base/status.h"
#include "common/base/table.h"
#include "orchestrator/run/config_change.h"
#include "common/ipc/control_client.h"
#include "common/ipc/control_protocol.h"
#include "orchestrator/service/control_socket.h"
#include "orchestrator/run/dataset_store.h"
#include "orchestrator/run/ensemble_summary.h"
#include "orchestrator/workers/executor.h"
#include "orchestrator/gpu/gpu_monitor.h"
#include "orchestrator/service/http_endpoint.h"
#include "orchestrator/run/mutation_view.h"
#include "orchestrator/run/round_runner.h"
#include "orchestrator/service/run_snapshot.h"
#include "orchestrator/service/systemd_notifier.h"
#include "orchestrator/workers/worker_pool.h"

namespace ens {

struct SupervisorOptions {
  std::string worker_binary;   // path of ensemble-worker
  std::string config_path;     // re-read by `ensemblectl reload`
  int signal_fd = -1;          // signalfd for SIGINT/SIGTERM (stop) and SIGHUP (read and ignored), or -1 (tests)
  // Resume even when the config changes results (config_change.h): a new config epoch.
  bool accept_config_change = false;
  // Injected (tests): where workers run and how they talk; not owned. Null: built from
  // resources.executor (executor_factory.h).
  Executor* executor = nullptr;
  Transport* transport = nullptr;
};

class Supervisor : private RoundHost {
 public:
  Supervisor(Config config, SupervisorOptions opts);
  ~Supervisor() override;
  // Returns an exit code from common/base/exit_codes.h.
  int Run();
  // Whether a run serves control command `c` (has its handler; supervisor_service.cpp).
  static bool Serves(ControlCommand c);

 private:
  Status Prepare();
  // A run whose journal says it is finished or complete: exit code, or nullopt to go on.
  std::optional<int> FinishedOrExtended();
  // The GPUs found and the workers planned on them (local executor).
  StatusOr<std::vector<WorkerPlacement>> PlanLocalWorkers();
  // The executor and transport of resources.executor (unless injected), and the slots they get
  // (executor_factory.h).
  Status SetUpExecutor(std::vector<WorkerPlacement>* placements);
  int RunWith(const std::vector<WorkerPlacement>& placements);  // the rounds, once workers are planned
  // The rounds from progress_.next_round on; an exit code.
  int RunRounds();
  Status PublishFreshData();
  // Compares the config with state_dir/config.json on resume (config_change.h).
  Status CheckConfigOnResume();
  // A resume's config epoch: the recorded one, or a later one the journal accepted.
  void ApplyJournaledConfigChanges(RecordedConfig* r, const nlohmann::json& now) const;
  Status CheckScriptMembers() const;
  RoundEnd RunRound(int round, Status* error);
  Status CommitRound(int round, double wall_seconds, bool* stop_now);
  // The round's finished members' results (members whose directory is complete). A member
  // journaled by this process in this round gives the result read at its report (taken from
  // reported_); the others are read from their directories.
  StatusOr<std::vector<MemberResult>> LoadRoundResults(int round, bool journaled_only);
  // The journal recorded `mut` in `record` (round_committed or mutation_applied, as written):
  // progress_ applies that record alone, so a commit costs the same in round 10 and 10,000.
  void MutationRecorded(const nlohmann::json& record, const AppliedMutation& mut);
  void PrintCommitted(int round, const EnsembleSummary& ens, uint64_t trained_rows, uint64_t added,
                      double wall_seconds) const;
  // Decides round `round`'s mutation (none when `skip`) and appends its rows as the next
  // generation.
  Status DecideAndAppend(int round, const nlohmann::json& summary,
                         const std::vector<MemberResult>& results, bool skip, AppliedMutation* out);
  // A `command` mutation's view of the run (mutation_view.h) after round `round`.
  StatusOr<MutationView> CommandMutationView(int round, uint64_t generation,
                                             const std::vector<MemberResult>& results) const;
  // An extended run: the mutation its last committed round skipped, decided now.
  Status ApplyDeferredMutation();
  // The retention policy (common/state/retention.h) after a commit, or when the rounds begin
  // (`resuming`: also finishes removals a crash cut short).
  Status ApplyRetention(bool resuming);
  bool HandleSignals();  // false when the loop must end now
  void PrintFinalTable() const;
  // ---- RoundHost: what a round needs of the run ----
  Stop StopState() const override;
  bool Paused() const override { return paused_; }
  // The control socket's listener and open connections (ControlSocket::PollFds), the signalfd.
  std::vector<int> WaitFds() const override {
    std::vector<int> fds = control_.PollFds();
    fds.push_back(opts_.signal_fd);
    return fds;
  }
  bool Tick(size_t failed) override;
  TaskSpec MakeTask(int round, int index, int attempt) const override;
  void MemberJournaled(const MemberDoneRecord& record, const std::string& out_dir, MemberResult result) override;
  void MemberFailedJournaled() override { ++counters_.members_failed_total; }
  void MemberRetried() override { ++counters_.members_retried_total; }
  // ---- service side (supervisor_service.cpp) ----
  Status StartService();  // control socket, HTTP endpoint
  // Each loop pass: control requests, sd_notify, watchdog; status.json and the HTTP snapshot
  // at most 1/s unless forced.
  void ServiceTick(bool force);
  // A control request: its command's handler (RunCommandHandlers), or refused by its scope.
  nlohmann::json HandleControl(const nlohmann::json& request);
  struct RunCommandHandler {
    ControlCommand command;
    nlohmann::json (*handle)(Supervisor& run, const nlohmann::json& request);
  };
  // One row per command a run serves (kRunScope): what the run does with it.
  static const std::vector<RunCommandHandler>& RunCommandHandlers();
  // ensemblectl reload: the config file read again; a change it may not make live is refused.
  nlohmann::json Reload();
  void RequestStop(const std::string& why);
  void ApplyPendingReload();
  void RecordFinished(const std::string& member, const std::string& dir, double seconds);
  // The status page's curves when this process has finished no member yet (a run resumed
  // after its round's members were done, or finished): the last committed round's, from its
  // members' files (either results layout). Once.
  void CurvesOfLastCommittedRound();
  RunSnapshot BuildSnapshot() const;

  Config cfg_;
  SupervisorOptions opts_;
  RunLayout layout_;
  std::string run_id_;
  int lock_fd_ = -1;
  std::unique_ptr<Journal> journal_;
  RunProgress progress_;
  // The results of round reported_round_'s members journaled by this process, read at their
  // report, until its commit takes them (LoadRoundResults): each member's files are read once.
  std::map<std::string, MemberResult> reported_;
  int reported_round_ = -1;
  DatasetStore data_;
  // What the members predict (fixed for the run: its loss and task are not reloadable).
  RunHead Head() const { return RunHead::For(cfg_, data_.classes().size(), data_.holdout().targets); }
  size_t PredictionWidth() const { return static_cast<size_t>(Head().OutputWidth()); }
  // Declared before workers_: the pool's shutdown still uses them.
  std::unique_ptr<Executor> own_executor_;
  std::unique_ptr<Transport> own_transport_;
  Executor* executor_ = nullptr;
  Transport* transport_ = nullptr;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<GpuMonitor> gpus_;  // the GPUs found at start, sampled through NVML
  int stop_requests_ = 0;
  std::chrono::steady_clock::time_point stop_deadline_{}, last_status_write_{};
  bool paused_ = false;
  int current_round_ = 0;
  int config_epoch_ = 0;  // state_dir/config.json's epoch
  size_t round_failed_ = 0;
  std::optional<Config> pending_reload_;
  ControlSocket control_;
  SystemdNotifier notifier_;
  Published<RunSnapshot> http_snapshot_;  // what http_ shows (declared first: it outlives http_)
  std::unique_ptr<HttpEndpoint> http_;
  RunSnapshot counters_;  // only the *_total counters and task histogram are kept here
  // Loss curves of the current round's first kMaxCurves finished members (status page): a
  // chart of thousands of lines says nothing, and reading every history costs O(members).
  static constexpr size_t kMaxCurves = 64;
  std::map<std::string, MemberCurve> curves_;
  int curves_round_ = 0;
  bool curves_looked_back_ = false;  // CurvesOfLastCommittedRound has run
};

}  // namespace ens
