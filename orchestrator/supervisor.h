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
// Single-threaded. Run() is called once.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/class_list.h"
#include "common/config.h"
#include "common/dataset_segment.h"
#include "common/journal.h"
#include "common/member_result.h"
#include "common/run_layout.h"
#include "common/status.h"
#include "common/table.h"
#include "orchestrator/control_socket.h"
#include "orchestrator/executor.h"
#include "orchestrator/gpu_monitor.h"
#include "orchestrator/http_endpoint.h"
#include "orchestrator/mutation_view.h"
#include "orchestrator/run_snapshot.h"
#include "orchestrator/systemd_notifier.h"
#include "orchestrator/worker_pool.h"

namespace ens {

struct SupervisorOptions {
  std::string worker_binary;   // path of ensemble-worker
  std::string config_path;     // re-read by `ensemblectl reload`
  int signal_fd = -1;          // signalfd for SIGINT/SIGTERM (stop) and SIGHUP (read and ignored), or -1 (tests)
  // Resume even when the config changes results (config_change.h): a new config epoch.
  bool accept_config_change = false;
  // Injected (tests): where workers run and how they talk; not owned. Null: built from
  // resources.executor (local: LocalExecutor + LocalTransport; slurm: SlurmExecutor + TcpTransport).
  Executor* executor = nullptr;
  Transport* transport = nullptr;
};

class Supervisor {
 public:
  Supervisor(Config config, SupervisorOptions opts);
  ~Supervisor();
  // Returns an exit code from common/exit_codes.h.
  int Run();

 private:
  enum class RoundEnd { kComplete, kStopped, kFailed };
  Status Prepare();
  // The executor and transport of resources.executor (unless injected), and the slots they get.
  Status SetUpExecutor(std::vector<WorkerPlacement>* placements);
  int RunWith(const std::vector<WorkerPlacement>& placements);  // the rounds, once workers are planned
  Status PublishFreshData();
  // Compares the config with state_dir/config.json on resume (config_change.h).
  Status CheckConfigOnResume();
  Status CheckScriptMembers() const;
  // data/holdout_x.npy and data/pool_x.npy (run_layout.h), when missing.
  Status PublishFeatureFiles() const;
  Status ReopenData(const RunProgress& p);
  RoundEnd RunRound(int round, Status* error);
  Status CommitRound(int round, double wall_seconds, bool* stop_now);
  // What a round boundary's mutation did to the training segment.
  struct AppliedMutation {
    uint64_t generation = 0;          // the generation it published
    std::vector<uint64_t> pool_ids;   // pool rows it moved into train
    std::string excluded_file;        // the dropped-rows file of that generation ("" = none)
    uint64_t added = 0;
    uint64_t dropped = 0;             // rows newly dropped by this mutation
    uint64_t dropped_rows = 0;        // rows dropped in all, this one included
  };
  // Decides round `round`'s mutation (none when `skip`) and appends its rows as the next
  // generation.
  Status DecideAndAppend(int round, const nlohmann::json& summary,
                         const std::vector<MemberResult>& results, bool skip, AppliedMutation* out);
  // A `command` mutation's view of the run (mutation_view.h) after round `round`.
  StatusOr<MutationView> CommandMutationView(int round, uint64_t generation,
                                             const std::vector<MemberResult>& results) const;
  // An extended run: the mutation its last committed round skipped, decided now.
  Status ApplyDeferredMutation();
  TaskSpec MakeTask(int round, int index, int attempt) const;
  bool HandleSignals();  // false when the loop must end now
  void PrintFinalTable() const;
  // ---- service side (supervisor_service.cpp) ----
  Status StartService();  // control socket, HTTP endpoint
  // Each loop pass: control requests, sd_notify, watchdog; status.json and the HTTP snapshot
  // at most 1/s unless forced.
  void ServiceTick(bool force);
  nlohmann::json HandleControl(const nlohmann::json& request);
  void RequestStop(const std::string& why);
  void ApplyPendingReload();
  void RecordFinished(const std::string& member, const std::string& dir, double seconds);
  RunSnapshot BuildSnapshot() const;

  Config cfg_;
  SupervisorOptions opts_;
  RunLayout layout_;
  std::string run_id_;
  int lock_fd_ = -1;
  std::unique_ptr<Journal> journal_;
  RunProgress progress_;
  std::unique_ptr<DatasetWriter> train_;
  Table holdout_, pool_;
  ClassList classes_;  // classification: the run's classes (run.json); empty for regression
  // Values per row in a member's prediction files: the target count (1 but for
  // target_columns), or the class count.
  // Gaussian heads (every member's loss gaussian_nll, config.h): rows of [mean, variance].
  bool Gaussian() const { return !cfg_.members.empty() && cfg_.members[0].loss == LossKind::kGaussianNll; }
  size_t PredictionWidth() const {
    return classes_.empty() ? (Gaussian() ? 2 : static_cast<size_t>(holdout_.targets))
                            : static_cast<size_t>(classes_.size());
  }
  std::vector<bool> pool_used_;
  std::vector<uint64_t> excluded_;
  std::string excluded_file_;
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
  std::unique_ptr<HttpEndpoint> http_;
  RunSnapshot counters_;  // only the *_total counters and task histogram are kept here
  // Loss curves of the current round's first kMaxCurves finished members (status page): a
  // chart of thousands of lines says nothing, and reading every history costs O(members).
  static constexpr size_t kMaxCurves = 64;
  std::map<std::string, MemberCurve> curves_;
  int curves_round_ = 0;
};

}  // namespace ens
