// RenderPrometheus: the /metrics endpoint's text.
#include <cmath>

#include "orchestrator/service/prometheus_writer.h"
#include "orchestrator/service/run_snapshot.h"

namespace ens {
namespace {

using Writer = PrometheusWriter;

// The run's position and its counters since the daemon started. `run`: the run label.
void WriteProgress(Writer& w, const RunSnapshot& s, const std::string& run) {
  w.Family("ensembled_round", "gauge", "Round being trained (0-based).");
  w.Sample("ensembled_round", s.round, run);
  w.Family("ensembled_rounds_completed", "gauge", "Rounds committed so far.");
  w.Sample("ensembled_rounds_completed", static_cast<double>(s.rounds_committed), run);
  w.Family("ensembled_members_finished_total", "counter", "Members finished since the daemon started.");
  w.Sample("ensembled_members_finished_total", static_cast<double>(s.members_finished_total), run);
  w.Family("ensembled_members_failed_total", "counter", "Members given up on since the daemon started.");
  w.Sample("ensembled_members_failed_total", static_cast<double>(s.members_failed_total), run);
  w.Family("ensembled_members_retried_total", "counter", "Member task retries since the daemon started.");
  w.Sample("ensembled_members_retried_total", static_cast<double>(s.members_retried_total), run);
  w.Family("ensembled_worker_restarts_total", "counter", "Unplanned worker restarts (deaths).");
  w.Sample("ensembled_worker_restarts_total", static_cast<double>(s.worker_restarts_total), run);
  w.Family("ensembled_worker_recycles_total", "counter", "Planned worker replacements (recycle policy).");
  w.Sample("ensembled_worker_recycles_total", static_cast<double>(s.worker_recycles_total), run);
  w.Family("ensembled_bad_messages_total", "counter", "Messages rejected by validation.");
  w.Sample("ensembled_bad_messages_total", static_cast<double>(s.bad_messages_total), run);
}

// The histogram of finished member tasks' wall times.
void WriteTaskDurations(Writer& w, const RunSnapshot& s, const std::string& run) {
  w.Family("ensembled_task_duration_seconds", "histogram", "Wall time of finished member tasks.");
  for (size_t i = 0; i < s.task_seconds_bucket_bounds.size(); ++i) {
    std::ostringstream le;
    le << s.task_seconds_bucket_bounds[i];
    w.Sample("ensembled_task_duration_seconds_bucket",
             static_cast<double>(i < s.task_seconds_buckets.size() ? s.task_seconds_buckets[i] : 0),
             run + ",le=\"" + le.str() + "\"");
  }
  w.Sample("ensembled_task_duration_seconds_bucket", static_cast<double>(s.task_seconds_count), run + ",le=\"+Inf\"");
  w.Sample("ensembled_task_duration_seconds_sum", s.task_seconds_sum, run);
  w.Sample("ensembled_task_duration_seconds_count", static_cast<double>(s.task_seconds_count), run);
}

// Each worker process's resident set and CUDA reservation, by slot.
void WriteWorkerMemory(Writer& w, const RunSnapshot& s, const std::string& run) {
  w.Family("ensembled_worker_rss_bytes", "gauge", "Resident set of each worker process.");
  for (const auto& wk : s.workers)
    w.Sample("ensembled_worker_rss_bytes", static_cast<double>(wk.rss_kb) * 1024,
             run + ",slot=\"" + std::to_string(wk.slot) + "\",gpu=\"" + PrometheusLabel(wk.gpu) + "\"");
  w.Family("ensembled_worker_gpu_reserved_bytes", "gauge", "CUDA memory reserved by each worker (0 on CPU).");
  for (const auto& wk : s.workers)
    w.Sample("ensembled_worker_gpu_reserved_bytes", wk.gpu_reserved_mb * 1048576,
             run + ",slot=\"" + std::to_string(wk.slot) + "\",gpu=\"" + PrometheusLabel(wk.gpu) + "\"");
}

// GPUs (GpuMonitor, through NVML), and each worker's memory on its GPU: a reading NVML did not
// give is left out, and a family with no reading at all too.
void WriteGpus(Writer& w, const RunSnapshot& s, const std::string& run) {
  auto gpu_labels = [&](int index, const std::string& uuid) {
    return run + ",gpu=\"" + std::to_string(index) + "\",uuid=\"" + PrometheusLabel(uuid) + "\"";
  };
  auto gpu_family = [&](const char* name, const char* help, auto value) {
    bool any = false;
    for (const auto& g : s.gpus) {
      double v = value(g);
      if (v < 0) continue;
      if (!any) w.Family(name, "gauge", help);
      any = true;
      w.Sample(name, v, gpu_labels(g.index, g.uuid));
    }
  };
  gpu_family("ensembled_gpu_memory_used_bytes", "GPU memory in use (all processes).",
             [](const GpuView& g) { return g.memory_used_mb < 0 ? -1.0 : g.memory_used_mb * 1048576; });
  gpu_family("ensembled_gpu_memory_total_bytes", "GPU memory in total.",
             [](const GpuView& g) { return g.memory_total_mb < 0 ? -1.0 : g.memory_total_mb * 1048576; });
  gpu_family("ensembled_gpu_utilization_ratio", "GPU utilisation over NVML's last sample period (0..1).",
             [](const GpuView& g) { return g.utilization_pct < 0 ? -1.0 : g.utilization_pct / 100.0; });
  gpu_family("ensembled_gpu_temperature_celsius", "GPU core temperature.",
             [](const GpuView& g) { return static_cast<double>(g.temperature_c); });
  gpu_family("ensembled_gpu_power_watts", "GPU power draw.", [](const GpuView& g) { return g.power_w; });
  bool any_worker_gpu = false;
  for (const auto& wk : s.workers) {
    if (wk.gpu_memory_mb < 0) continue;
    if (!any_worker_gpu)
      w.Family("ensembled_gpu_worker_memory_bytes", "gauge", "GPU memory of each worker process (NVML).");
    any_worker_gpu = true;
    std::string uuid = wk.gpu, index;
    for (const auto& g : s.gpus)
      if (g.uuid == wk.gpu || std::to_string(g.index) == wk.gpu) uuid = g.uuid, index = std::to_string(g.index);
    w.Sample("ensembled_gpu_worker_memory_bytes", wk.gpu_memory_mb * 1048576,
             run + ",slot=\"" + std::to_string(wk.slot) + "\",gpu=\"" + index + "\",uuid=\"" + PrometheusLabel(uuid) + "\"");
  }
}

// The dataset generation and, per committed round of the snapshot's window (the last
// kRecentRounds: a series per round of a 10,000-round run is no use to a scraper), its wall time
// and ensemble holdout scores.
void WriteRounds(Writer& w, const RunSnapshot& s, const std::string& run) {
  w.Family("ensembled_dataset_rows", "gauge", "Training rows of the current dataset generation.");
  w.Sample("ensembled_dataset_rows", static_cast<double>(s.dataset_rows), run);
  w.Family("ensembled_dataset_generation", "gauge", "Current dataset generation.");
  w.Sample("ensembled_dataset_generation", static_cast<double>(s.dataset_generation), run);
  const std::string window = "each of the last " + std::to_string(kRecentRounds) + " committed";
  w.Family("ensembled_round_duration_seconds", "gauge", "Wall time of " + window + " rounds.");
  for (const auto& r : s.rounds_done)
    w.Sample("ensembled_round_duration_seconds", r.wall_seconds, run + ",round=\"" + std::to_string(r.round) + "\"");
  // Regression rounds: RMSE; classification rounds: accuracy; both: the error stop_below_error reads.
  struct Score {
    TaskKind task;
    const char* family;
    std::string help;
  };
  for (const Score& m : {Score{TaskKind::kRegression, "ensembled_ensemble_rmse", "Ensemble holdout RMSE of " + window + " rounds."},
                         Score{TaskKind::kClassification, "ensembled_ensemble_accuracy",
                               "Ensemble holdout accuracy of " + window + " classification rounds."}}) {
    bool any = false;
    for (const auto& r : s.rounds_done) any = any || r.task == m.task;
    if (!any) continue;
    w.Family(m.family, "gauge", m.help);
    for (const auto& r : s.rounds_done)
      if (r.task == m.task) w.Sample(m.family, r.ensemble, run + ",round=\"" + std::to_string(r.round) + "\"");
  }
  w.Family("ensembled_ensemble_error", "gauge",
           "Ensemble holdout error of " + window + " rounds: RMSE, or the fraction misclassified.");
  for (const auto& r : s.rounds_done)
    w.Sample("ensembled_ensemble_error", r.ensemble_error, run + ",round=\"" + std::to_string(r.round) + "\"");
}

// Calibration of the last committed round (one series per run, no round label; the round is
// ensembled_rounds_completed - 1); left out where that round's summary has none.
void WriteCalibration(Writer& w, const RunSnapshot& s, const std::string& run) {
  if (s.rounds_done.empty()) return;
  const RoundView& last = s.rounds_done.back();
  for (size_t i = 0; i < kRoundFigureCount; ++i) {  // round_figures.h: one gauge a figure
    const std::optional<double>& v = last.figures[i];
    if (!v) continue;
    w.Family(kRoundFigures[i].metric, "gauge", kRoundFigures[i].help);
    w.Sample(kRoundFigures[i].metric, *v, run);
  }
}

}  // namespace

std::string RenderPrometheus(const RunSnapshot& s) {
  Writer w;
  const std::string run = "run=\"" + PrometheusLabel(s.run_name) + "\"";
  WriteProgress(w, s, run);
  WriteTaskDurations(w, s, run);
  WriteWorkerMemory(w, s, run);
  WriteGpus(w, s, run);
  WriteRounds(w, s, run);
  WriteCalibration(w, s, run);
  return w.str();
}

}  // namespace ens
