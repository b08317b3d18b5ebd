#include "orchestrator/service/run_snapshot.h"

#include <algorithm>
#include <type_traits>


namespace ens {

RoundView RoundView::FromSummary(int round, uint64_t trained_rows, const nlohmann::json& e, double wall_seconds) {
  RoundView r;
  r.round = round;
  r.trained_rows = trained_rows;
  r.wall_seconds = wall_seconds;
  r.ensemble_error = SummaryError(e);
  if (e.contains("ensemble_accuracy")) {
    r.task = TaskKind::kClassification;
    r.member_mean = e.value("member_accuracy_mean", 0.0);
    r.member_std = e.value("member_accuracy_std", 0.0);
    r.ensemble = e.value("ensemble_accuracy", 0.0);
  } else {
    r.member_mean = e.value("member_rmse_mean", 0.0);
    r.member_std = e.value("member_rmse_std", 0.0);
    r.ensemble = e.value("ensemble_rmse", 0.0);
  }
  for (size_t i = 0; i < kRoundFigureCount; ++i) {
    const char* key = RoundFigureSummaryKey(kRoundFigures[i], r.task == TaskKind::kClassification);
    if (*key != '\0' && e.is_object() && e.contains(key) && e[key].is_number()) r.figures[i] = e[key].get<double>();
  }
  if (e.is_object() && e.contains("reliability") && e["reliability"].is_object()) {
    const nlohmann::json& rel = e["reliability"];
    auto curve = [&rel](const char* key, std::vector<double>* out) {
      if (!rel.contains(key) || !rel[key].is_array()) return;
      for (const auto& v : rel[key])
        if (v.is_number()) out->push_back(v.get<double>());
    };
    curve("raw", &r.reliability_raw);
    curve("calibrated", &r.reliability_calibrated);
  }
  return r;
}

void SetCommittedRounds(RunSnapshot* s, const std::vector<RoundCommittedRecord>& committed) {
  const size_t n = committed.size();
  s->rounds_committed = static_cast<int>(n);
  s->rounds_done.clear();
  for (size_t i = n - std::min<size_t>(n, kRecentRounds); i < n; ++i) {
    const RoundCommittedRecord& c = committed[i];
    s->rounds_done.push_back(RoundView::FromSummary(c.round, c.trained_rows, c.summary, c.wall_seconds));
  }
}

std::string RoundPosition(int round, int rounds) {
  return "round " + std::to_string(round) + " (" + std::to_string(round + 1) + " of " + std::to_string(rounds) + ")";
}

namespace {

// At most kCurvePoints of `y`: evenly spaced, the first and the last kept.
std::vector<double> Thinned(const std::vector<double>& y) {
  if (y.size() <= kCurvePoints) return y;
  std::vector<double> out;
  for (size_t i = 0; i < kCurvePoints; ++i) out.push_back(y[i * (y.size() - 1) / (kCurvePoints - 1)]);
  return out;
}

}  // namespace

nlohmann::json SnapshotToJson(const RunSnapshot& s) {
  nlohmann::json workers = nlohmann::json::array();
  for (const auto& w : s.workers)
    workers.push_back({{"slot", w.slot}, {"gpu", w.gpu}, {"pid", w.pid}, {"state", w.state}, {"member", w.member},
                       {"phase", w.phase}, {"rss_kb", w.rss_kb}, {"gpu_reserved_mb", w.gpu_reserved_mb},
                       {"tasks_since_start", w.tasks_since_start}, {"spawns", w.spawns}, {"recycles", w.recycles},
                       {"gpu_memory_mb", w.gpu_memory_mb}});
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : s.gpus)
    gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"memory_used_mb", g.memory_used_mb},
                    {"memory_total_mb", g.memory_total_mb}, {"utilization_pct", g.utilization_pct},
                    {"temperature_c", g.temperature_c}, {"power_w", g.power_w}});
  nlohmann::json rounds = nlohmann::json::array();
  auto figure = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& r : s.rounds_done) {
    rounds.push_back({{"round", r.round}, {"trained_rows", r.trained_rows}, {"metric", std::string(r.score_name())},
                      {"member_mean", r.member_mean}, {"member_std", r.member_std}, {"ensemble", r.ensemble},
                      {"ensemble_error", r.ensemble_error}, {"wall_seconds", r.wall_seconds}});
    for (size_t i = 0; i < kRoundFigureCount; ++i) rounds.back()[kRoundFigures[i].key] = figure(r.figures[i]);
    if (&r == &s.rounds_done.back() && !r.reliability_raw.empty())
      rounds.back()["reliability"] = {{"raw", r.reliability_raw}, {"calibrated", r.reliability_calibrated}};
  }
  // The member curves, each at most kCurvePoints points (evenly spaced epochs, the last kept):
  // the served run's page draws them from this file.
  nlohmann::json curves = nlohmann::json::object();
  for (const auto& [name, c] : s.curves) curves[name] = {{"loss", Thinned(c.loss)}, {"val_loss", Thinned(c.val_loss)}};
  return {{"run_name", s.run_name}, {"pid", s.pid}, {"control_socket", s.control_socket},
          {"curves", curves}, {"curves_round", s.curves_round},
          {"paused", s.paused}, {"stopping", s.stopping}, {"finished", s.finished}, {"finish_reason", s.finish_reason}, {"round", s.round}, {"rounds", s.rounds},
          {"members_total", s.members_total}, {"members_done", s.members_done},
          {"members_running", s.members_running}, {"members_failed", s.members_failed_round},
          {"eta_round_s", s.eta_round_s}, {"dataset_rows", s.dataset_rows},
          {"dataset_generation", s.dataset_generation}, {"config_epoch", s.config_epoch},
          {"members_finished_total", s.members_finished_total},
          {"members_failed_total", s.members_failed_total}, {"members_retried_total", s.members_retried_total},
          {"worker_restarts_total", s.worker_restarts_total}, {"worker_recycles_total", s.worker_recycles_total},
          {"bad_messages", s.bad_messages_total}, {"unplanned_restarts", s.worker_restarts_total},
          {"workers", workers}, {"rounds_committed", s.rounds_committed}, {"rounds_done", rounds},
          {"gpu_source", s.gpu_source}, {"gpus", gpus}};
}

namespace {

template <typename T>
void Take(const nlohmann::json& j, const char* key, T* out) {
  if (!j.is_object() || !j.contains(key)) return;
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) *out = v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) *out = v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::optional<double>>) {
    if (v.is_number()) *out = v.get<double>();  // null: not known
  } else {
    if (v.is_number()) *out = v.get<T>();
  }
}

}  // namespace

namespace {

// The member curves of status.json ("curves": {"<member>": {"loss": [...], "val_loss": [...]}}).
std::map<std::string, MemberCurve> CurvesFromJson(const nlohmann::json& j) {
  std::map<std::string, MemberCurve> out;
  if (!j.is_object() || !j.contains("curves") || !j["curves"].is_object()) return out;
  for (const auto& [name, c] : j["curves"].items()) {
    MemberCurve curve;
    for (const char* key : {"loss", "val_loss"})
      if (c.is_object() && c.contains(key) && c[key].is_array())
        for (const auto& v : c[key]) (std::string(key) == "loss" ? curve.loss : curve.val_loss).push_back(v.is_number() ? v.get<double>() : 0.0);
    out[name] = std::move(curve);
  }
  return out;
}

// j[key] when it is an array, else an empty one.
nlohmann::json ArrayAt(const nlohmann::json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_array() ? j[key] : nlohmann::json::array();
}

// The workers, GPUs and committed rounds of status.json.
void ListsFromJson(const nlohmann::json& j, RunSnapshot* snapshot) {
  RunSnapshot& s = *snapshot;
  auto items = [&](const char* key) { return ArrayAt(j, key); };
  for (const auto& w : items("workers")) {
    WorkerView v;
    Take(w, "slot", &v.slot);
    Take(w, "gpu", &v.gpu);
    Take(w, "pid", &v.pid);
    Take(w, "state", &v.state);
    Take(w, "member", &v.member);
    Take(w, "phase", &v.phase);
    Take(w, "rss_kb", &v.rss_kb);
    Take(w, "gpu_reserved_mb", &v.gpu_reserved_mb);
    Take(w, "tasks_since_start", &v.tasks_since_start);
    Take(w, "spawns", &v.spawns);
    Take(w, "recycles", &v.recycles);
    Take(w, "gpu_memory_mb", &v.gpu_memory_mb);
    s.workers.push_back(v);
  }
  for (const auto& g : items("gpus")) {
    GpuView v;
    Take(g, "index", &v.index);
    Take(g, "uuid", &v.uuid);
    Take(g, "name", &v.name);
    Take(g, "memory_used_mb", &v.memory_used_mb);
    Take(g, "memory_total_mb", &v.memory_total_mb);
    Take(g, "utilization_pct", &v.utilization_pct);
    Take(g, "temperature_c", &v.temperature_c);
    Take(g, "power_w", &v.power_w);
    s.gpus.push_back(v);
  }
  for (const auto& r : items("rounds_done")) {
    RoundView v;
    Take(r, "round", &v.round);
    Take(r, "trained_rows", &v.trained_rows);
    std::string metric;
    Take(r, "metric", &metric);
    if (metric == RoundView::ScoreName(TaskKind::kClassification)) v.task = TaskKind::kClassification;
    Take(r, "member_mean", &v.member_mean);
    Take(r, "member_std", &v.member_std);
    Take(r, "ensemble", &v.ensemble);
    Take(r, "ensemble_error", &v.ensemble_error);
    Take(r, "wall_seconds", &v.wall_seconds);
    for (size_t i = 0; i < kRoundFigureCount; ++i) Take(r, kRoundFigures[i].key, &v.figures[i]);
    if (r.contains("reliability") && r["reliability"].is_object()) {
      for (const auto& x : r["reliability"].value("raw", nlohmann::json::array()))
        if (x.is_number()) v.reliability_raw.push_back(x.get<double>());
      for (const auto& x : r["reliability"].value("calibrated", nlohmann::json::array()))
        if (x.is_number()) v.reliability_calibrated.push_back(x.get<double>());
    }
    s.rounds_done.push_back(v);
  }
}

}  // namespace

RunSnapshot SnapshotFromJson(const nlohmann::json& j) {
  RunSnapshot s;
  Take(j, "run_name", &s.run_name);
  Take(j, "pid", &s.pid);
  Take(j, "control_socket", &s.control_socket);
  Take(j, "paused", &s.paused);
  Take(j, "stopping", &s.stopping);
  Take(j, "finished", &s.finished);
  Take(j, "finish_reason", &s.finish_reason);
  Take(j, "round", &s.round);
  Take(j, "rounds", &s.rounds);
  Take(j, "members_total", &s.members_total);
  Take(j, "members_done", &s.members_done);
  Take(j, "members_running", &s.members_running);
  Take(j, "members_failed", &s.members_failed_round);
  Take(j, "eta_round_s", &s.eta_round_s);
  Take(j, "dataset_rows", &s.dataset_rows);
  Take(j, "dataset_generation", &s.dataset_generation);
  Take(j, "config_epoch", &s.config_epoch);
  Take(j, "members_finished_total", &s.members_finished_total);
  Take(j, "members_failed_total", &s.members_failed_total);
  Take(j, "members_retried_total", &s.members_retried_total);
  Take(j, "worker_restarts_total", &s.worker_restarts_total);
  Take(j, "worker_recycles_total", &s.worker_recycles_total);
  Take(j, "bad_messages", &s.bad_messages_total);
  Take(j, "gpu_source", &s.gpu_source);
  Take(j, "curves_round", &s.curves_round);
  s.curves = CurvesFromJson(j);
  ListsFromJson(j, &s);
  s.rounds_committed = static_cast<int>(s.rounds_done.size());
  Take(j, "rounds_committed", &s.rounds_committed);
  return s;
}

void AddGpuReadings(const GpuReadings& g, RunSnapshot* s) {
  s->gpu_source = g.source;
  s->gpus = g.gpus;
  s->gpu_history_s = g.history_s;
  s->gpu_history_mb = g.history_mb;
  for (WorkerView& w : s->workers) {
    auto it = w.pid > 0 ? g.process_mb.find(static_cast<pid_t>(w.pid)) : g.process_mb.end();
    if (it != g.process_mb.end()) w.gpu_memory_mb = std::max(0.0, w.gpu_memory_mb) + it->second;
  }
}

}  // namespace ens
