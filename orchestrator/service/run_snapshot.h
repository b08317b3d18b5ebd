// RunSnapshot: a copy of what the supervisor knows, handed to the HTTP thread.
//
// The supervisor fills one from its loop (at most a few times a second) and publishes it;
// the metrics and status-page renderers read only snapshots, never live supervisor state,
// so the HTTP thread shares nothing mutable with the loop. Plain data.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/config/member_options.h"
#include "common/state/journal.h"
#include "orchestrator/gpu/gpu_view.h"
#include "orchestrator/service/round_figures.h"

namespace ens {

struct WorkerView {
  int slot = 0;
  std::string gpu;     // "cpu" for CPU workers
  int pid = 0;
  std::string state;
  std::string member;  // current member, "" when idle
  std::string phase;   // busy: setup, training, evaluating, predicting or writing; "" when idle
  int64_t rss_kb = 0;
  double gpu_reserved_mb = 0;
  int tasks_since_start = 0;
  int spawns = 0;
  int recycles = 0;
  double gpu_memory_mb = -1;  // this process's GPU memory as NVML sees it; -1: not known
};

// A committed round's scores: holdout RMSE (regression) or accuracy (classification).
struct RoundView {
  int round = 0;
  uint64_t trained_rows = 0;
  TaskKind task = TaskKind::kRegression;  // member_mean/_std and ensemble: RMSE, or accuracy
  // What member_mean/_std and ensemble hold, as status.json's "metric" and the pages name it.
  static std::string_view ScoreName(TaskKind task) { return task == TaskKind::kClassification ? "accuracy" : "RMSE"; }
  std::string_view score_name() const { return ScoreName(task); }
  double member_mean = 0, member_std = 0, ensemble = 0;
  double ensemble_error = 0;    // RMSE, or the fraction misclassified (stop_below_error's)
  double wall_seconds = 0;
  // The optional figures of kRoundFigures (round_figures.h), in its order: absent (nullopt;
  // null in status.json) where the round's summary has none (a summary written before them, a
  // one-member regression, a figure of the other kind of run).
  std::array<std::optional<double>, kRoundFigureCount> figures{};
  // A figure by name: figure("coverage_2sigma") (a name kRoundFigures lacks does not compile).
  const std::optional<double>& figure(RoundFigureName name) const { return figures[name.index]; }
  std::optional<double>& figure(RoundFigureName name) { return figures[name.index]; }
  // The reliability curve (observed coverage at kReliabilityNominal), raw and calibrated;
  // empty where the summary has none. status.json carries them for the last round only.
  std::vector<double> reliability_raw, reliability_calibrated;
  // From a round summary's "ensemble" object (ensemble_summary.h) of either kind.
  static RoundView FromSummary(int round, uint64_t trained_rows, const nlohmann::json& ensemble, double wall_seconds);
};

struct MemberCurve {
  std::vector<double> loss, val_loss;
};
// status.json holds each member curve thinned to at most this many points (the served run's
// page draws them from there; a chart is a few hundred pixels wide).
inline constexpr size_t kCurvePoints = 256;

// The committed rounds a snapshot carries: the last kRecentRounds. status.json is rewritten
// every second and at each round boundary, and /metrics and the status page are rendered from a
// snapshot, so what it holds must not grow with the run; the whole history stays in the journal
// (`ensemblectl status`, which reads it).
inline constexpr int kRecentRounds = 100;

struct RunSnapshot {
  std::string run_name;
  int pid = 0;                  // the supervisor's
  std::string control_socket;
  bool paused = false, stopping = false;
  // The run has finished (its journal says run_finished): the page says so, with the reason,
  // rather than the counts of a round that will not start.
  bool finished = false;
  std::string finish_reason;
  int round = 0, rounds = 0;
  int members_total = 0, members_done = 0, members_running = 0, members_failed_round = 0;
  uint64_t dataset_rows = 0, dataset_generation = 0;
  int config_epoch = 0;         // state_dir/config.json's epoch (accepted config changes)
  // Counters since this supervisor process started.
  uint64_t members_finished_total = 0, members_failed_total = 0, members_retried_total = 0;
  uint64_t worker_restarts_total = 0, worker_recycles_total = 0, bad_messages_total = 0;
  double task_seconds_sum = 0;
  uint64_t task_seconds_count = 0;
  std::vector<double> task_seconds_bucket_bounds = {0.1, 0.5, 1, 5, 15, 60, 300, 1800};
  std::vector<uint64_t> task_seconds_buckets;  // cumulative counts per bound (Prometheus "le")
  std::vector<WorkerView> workers;
  int rounds_committed = 0;            // every round committed so far
  std::vector<RoundView> rounds_done;  // the last min(rounds_committed, kRecentRounds), in order
  std::map<std::string, MemberCurve> curves;   // the first 64 finished members of the current (or last) round
  int curves_round = 0;
  double eta_round_s = -1;
  std::string gpu_source;           // where the GPUs were found: "nvml", "/proc/driver/nvidia/gpus", ...
  std::vector<GpuView> gpus;        // every GPU found (with NVML: sampled every few seconds)
  std::vector<double> gpu_history_s;                 // sample times, seconds since the daemon started
  std::vector<std::vector<double>> gpu_history_mb;   // [gpu][sample]: memory used, MiB
};

// "round 2 (3 of 4)": the round's own number, as in the journal, rounds/rNNNN and
// `verify --round`, and its position for a reader. Every human-facing view uses this.
std::string RoundPosition(int round, int rounds);

// Sets s->rounds_committed to committed.size() and s->rounds_done to the views of its last
// kRecentRounds records (round_committed records, in order, as RunProgress::committed holds
// them): O(kRecentRounds) however long the run.
void SetCommittedRounds(RunSnapshot* s, const std::vector<RoundCommittedRecord>& committed);

// status.json / `ensemblectl status` live view.
nlohmann::json SnapshotToJson(const RunSnapshot& s);
// The snapshot a status.json holds (what `ensembled serve` renders a run's page from): every
// field SnapshotToJson writes; the rest (curves, task-time buckets, GPU history) stay empty. A
// missing or mistyped field keeps its default: the file is a live view, not a record. A file
// without "rounds_committed" (written before the window) held every round: rounds_done's size.
RunSnapshot SnapshotFromJson(const nlohmann::json& j);
// Prometheus text exposition format (version 0.0.4).
std::string RenderPrometheus(const RunSnapshot& s);
// A self-contained HTML page with server-rendered SVG plots (no external assets).
std::string RenderStatusPage(const RunSnapshot& s);

// Takes in what the GPU monitor read: the GPUs, their history, and each worker's GPU memory
// (matched by pid). REQUIRES: s->workers filled.
void AddGpuReadings(const GpuReadings& g, RunSnapshot* s);

}  // namespace ens
