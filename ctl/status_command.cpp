#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "common/base/atomic_file.h"
#include "common/base/exit_codes.h"
#include "common/state/journal.h"
#include "common/state/retention.h"
#include "common/state/run_layout.h"
#include "ctl/commands.h"
#include "common/ipc/control_client.h"
#include "orchestrator/service/run_snapshot.h"

namespace ens::ctl {

using json = nlohmann::json;

namespace {

// One line of the queue's view of a served run: its state, grant, progress and reason.
std::string ServedLine(const json& r) {
  std::string line = "served: " + r.value("state", "?");
  line += (r.value("granted", false) ? ", holds " : ", asks ") + r.value("resources", "?");
  if (r.value("priority", 0) != 0) line += ", priority " + std::to_string(r.value("priority", 0));
  if (int n = r.value("preemptions", 0); n > 0) line += ", preempted " + std::to_string(n) + (n == 1 ? " time" : " times");
  if (!r.value("reason", "").empty()) line += "; " + r.value("reason", "");
  return line;
}

// A live reading (the worker's or NVML's) with printf format `fmt`; -1 (not given, or no NVML) is "-".
std::string Reading(const json& o, const char* key, const char* fmt) {
  double v = o.value(key, -1.0);
  if (v < 0) return std::string("-");
  char b[32];
  std::snprintf(b, sizeof(b), fmt, v);
  return std::string(b);
}

// A calibration figure of a round's table row; "-" where the round's summary has none.
std::string Figure(const std::optional<double>& v) {
  if (!v) return std::string("-");
  char b[32];
  std::snprintf(b, sizeof(b), "%.4f", *v);
  return std::string(b);
}

// The supervisor's live status when one runs the state directory right now (*running), else
// null. Only a supervisor holding the directory's lock counts; for a served run the daemon says
// whether it runs and passes its supervisor's answer on. Falls back to the file the daemon
// rewrites every second.
json LiveStatus(const RunLayout& layout, const std::string& state_dir, const std::string& socket, const json* served,
                bool* running) {
  json live;
  *running = false;
  if (served != nullptr) {
    const std::string state = (*served)["run"].value("state", "");
    *running = state == "running" || state == "stopping" || state == "preempting";
    if (served->contains("live") && (*served)["live"].is_object()) live = (*served)["live"];
  } else {
    int lock = ::open(layout.LockFile().c_str(), O_RDONLY | O_CLOEXEC);
    *running = lock >= 0 && ::flock(lock, LOCK_EX | LOCK_NB) != 0;
    if (lock >= 0) ::close(lock);
    if (*running) {
      auto reply = ControlRequest(FindControlSocket(state_dir, socket), {{"cmd", "status"}}, 3000);
      if (reply.ok() && reply->value("ok", false)) live = (*reply)["status"];
    }
  }
  if (*running && !live.is_object()) {
    auto text = ReadFile(layout.StatusFile());
    if (text.ok()) live = json::parse(*text, nullptr, false);
    if (live.is_discarded()) live = json();
  }
  return live;
}

// How many committed rounds hold each level of files (common/state/retention.h): {"all": n, ...}.
json RoundFilesCounts(const RunProgress& p) {
  json out = json::object();
  for (RoundFiles f : {RoundFiles::kAll, RoundFiles::kTrainState, RoundFiles::kRecords})
    out[Name(f)] = std::count(p.round_files.begin(), p.round_files.end(), f);
  return out;
}

// "1.5 GiB", "320.0 MiB", "12.0 KiB", "7 B".
std::string Bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char b[32];
  if (u == 0) std::snprintf(b, sizeof(b), "%llu B", static_cast<unsigned long long>(n));
  else std::snprintf(b, sizeof(b), "%.1f %s", v, units[u]);
  return b;
}

// The committed rounds' records as the journal holds them (with a later mutation folded in).
json CommittedRecords(const RunProgress& p) {
  json out = json::array();
  for (const RoundCommittedRecord& c : p.committed) out.push_back(ToRecord(c));
  return out;
}

// `ensemblectl status --json`'s object.
json StatusJson(const std::string& state_dir, const json& run, const RunProgress& p, bool running,
                const json& live, const json& last, const json* served) {
  json out = {{"run", run},
              {"finished", p.finished},
              {"finish_reason", p.finish_reason},
              {"rounds_committed", p.committed.size()},
              {"current_round", p.next_round},
              {"generation", p.generation},
              {"config_epoch", p.config_epoch},
              {"train_rows", p.training_rows()},
              {"members_done", p.done.size()},
              {"members_failed", p.failed.size()},
              {"running", running},
              {"live", live},
              {"last_summary", last},
              {"rounds", CommittedRecords(p)},
              {"state_dir_bytes", DirectoryBytes(state_dir)},
              {"round_files", RoundFilesCounts(p)}};
  if (served != nullptr) out["served"] = (*served)["run"];
  return out;
}

// The live view's lines: the round's progress and ETA, the worker table and, when NVML gave
// any, the GPU table.
void PrintLive(const json& live) {
  std::printf("%s%s: %d/%d members done, %d running, %d failed; ETA of the round %s\n",
              live.value("paused", false) ? "PAUSED; " : live.value("stopping", false) ? "STOPPING; " : "",
              RoundPosition(live.value("round", 0), live.value("rounds", 0)).c_str(), live.value("members_done", 0),
              live.value("members_total", 0), live.value("members_running", 0), live.value("members_failed", 0),
              live.value("eta_round_s", -1.0) < 0 ? "unknown"
                                                  : (std::to_string(static_cast<int>(live["eta_round_s"].get<double>())) + " s").c_str());
  std::printf("%-5s %-6s %-8s %-9s %-10s %10s %8s %8s %8s\n", "slot", "gpu", "pid", "state", "member", "RSS MiB",
              "GPU MiB", "tasks", "recycles");
  auto workers = live.find("workers");
  if (workers != live.end())
    for (const auto& w : *workers)
      std::printf("%-5d %-6s %-8d %-9s %-10s %10.1f %8s %8d %8d\n", w.value("slot", 0), w.value("gpu", "").c_str(),
                  w.value("pid", 0), w.value("state", "").c_str(), w.value("member", "").c_str(),
                  w.value("rss_kb", 0) / 1024.0, Reading(w, "gpu_memory_mb", "%.0f").c_str(),
                  w.value("tasks_since_start", 0), w.value("recycles", 0));
  if (live.contains("gpus") && live["gpus"].is_array() && !live["gpus"].empty()) {
    std::printf("GPUs (found through %s):\n", live.value("gpu_source", "?").c_str());
    std::printf("%-4s %-42s %-22s %18s %6s %6s %8s\n", "gpu", "uuid", "name", "memory MiB", "util%", "temp C",
                "power W");
    for (const auto& g : live["gpus"])
      std::printf("%-4d %-42s %-22s %18s %6s %6s %8s\n", g.value("index", 0), g.value("uuid", "").c_str(),
                  g.value("name", "").c_str(),
                  (Reading(g, "memory_used_mb", "%.0f") + " / " + Reading(g, "memory_total_mb", "%.0f")).c_str(),
                  Reading(g, "utilization_pct", "%.0f").c_str(), Reading(g, "temperature_c", "%.0f").c_str(),
                  Reading(g, "power_w", "%.1f").c_str());
  }
}

// One line per committed round: rows, member and ensemble holdout scores, and calibration
// (RoundView): regression, the coverage of the ensemble's +-1 and 2 sigma intervals and its
// Gaussian NLL; classification, NLL and ECE; "-" where a round's summary has none (written
// before them, or a one-member regression).
void PrintRounds(const RunProgress& p) {
  const bool classify = !p.committed.empty() && p.committed.back().summary.contains("ensemble_accuracy");
  const char* metric = classify ? "accuracy" : "RMSE";
  std::printf("%-6s %12s %28s %18s", "round", "train rows",
              (std::string("member holdout ") + metric + " (mean±std)").c_str(), (std::string("ensemble ") + metric).c_str());
  // The figures of kRoundFigures (round_figures.h) this kind of run has, with a column here.
  std::vector<size_t> shown;
  for (size_t i = 0; i < kRoundFigureCount; ++i)
    if (*kRoundFigures[i].text_header != '\0' && *RoundFigureSummaryKey(kRoundFigures[i], classify) != '\0')
      shown.push_back(i);
  for (size_t i : shown) std::printf(" %10s", kRoundFigures[i].text_header);
  std::printf("\n");
  for (const auto& c : p.committed) {
    const RoundView r = RoundView::FromSummary(c.round, c.trained_rows, c.summary, 0);
    std::printf("%-6d %12llu %19.4f ± %-7.4f %18.4f", r.round, static_cast<unsigned long long>(r.trained_rows),
                r.member_mean, r.member_std, r.ensemble);
    for (size_t i : shown) std::printf(" %10s", Figure(r.figures[i]).c_str());
    std::printf("\n");
  }
}

// The human-readable status: the run, its state, the live view when it runs, the round table
// and the current round's failed members.
void PrintStatus(const std::string& state_dir, const json& run, const RunProgress& p, bool running, const json& live,
                 const json* served) {
  std::printf("run %s (%s) in %s\n", run.value("run_name", "?").c_str(), run.value("run_id", "?").c_str(),
              state_dir.c_str());
  std::string state = p.finished  ? "finished: " + p.finish_reason
                      : running   ? "running"
                      : served    ? "not running (the queue's view below says why)"
                                  : "stopped (run again to resume)";
  std::printf("state: %s\n", state.c_str());
  if (served != nullptr) std::printf("%s\n", ServedLine((*served)["run"]).c_str());
  if (p.config_epoch > 0)
    std::printf("config epoch %d (ensembled run --accept-config-change; the journal's config_changed records say what)\n",
                p.config_epoch);
  if (live.is_object()) PrintLive(live);
  std::printf("rounds committed: %zu; current round %d: %zu members done, %zu failed; generation %llu, %llu train rows\n",
              p.committed.size(), p.next_round, p.done.size(), p.failed.size(),
              static_cast<unsigned long long>(p.generation), static_cast<unsigned long long>(p.training_rows()));
  const json counts = RoundFilesCounts(p);
  std::string pruned;
  if (counts["all"].get<size_t>() < p.committed.size())
    pruned = "; retention: " + std::to_string(counts["all"].get<size_t>()) + " committed round(s) keep every file, " +
             std::to_string(counts["train_state"].get<size_t>()) + " their train state, " +
             std::to_string(counts["records"].get<size_t>()) + " their records only";
  std::printf("disk: %s in %s%s\n", Bytes(DirectoryBytes(state_dir)).c_str(), state_dir.c_str(), pruned.c_str());
  PrintRounds(p);
  for (const auto& [name, f] : p.failed)
    std::printf("failed: %s: %s\n", name.c_str(), f.error.c_str());
}

}  // namespace

int ShowStatus(const std::string& state_dir, const std::string& socket, bool as_json, const json* served) {
  RunLayout layout(state_dir);
  if (served != nullptr && !PathExists(layout.RunFile())) {  // queued, never started: the queue's view alone
    if (as_json)
      std::cout << json{{"served", (*served)["run"]}, {"running", false}}.dump(2) << "\n";
    else
      std::printf("run %s in %s (not started yet)\n%s\n", (*served)["run"].value("name", "?").c_str(), state_dir.c_str(),
                  ServedLine((*served)["run"]).c_str());
    return exit_code::kOk;
  }
  auto run_text = ReadFile(layout.RunFile());
  if (!run_text.ok()) {
    std::cerr << "ensemblectl status: " << run_text.status().message() << " (no run in " << state_dir << "?)\n";
    return exit_code::kPermanentFailure;
  }
  json run = json::parse(*run_text, nullptr, false);
  auto recs = ReadJournal(layout.JournalFile());
  if (!recs.ok()) {
    std::cerr << "ensemblectl status: " << recs.status().message() << "\n";
    return exit_code::kPermanentFailure;
  }
  RunProgress p = ReplayJournal(*recs);
  bool running = false;
  json live = LiveStatus(layout, state_dir, socket, served, &running);
  json last = p.committed.empty() ? json() : p.committed.back().summary;
  if (as_json) {
    std::cout << StatusJson(state_dir, run, p, running, live, last, served).dump(2) << "\n";
    return exit_code::kOk;
  }
  PrintStatus(state_dir, run, p, running, live, served);
  return exit_code::kOk;
}

}  // namespace ens::ctl
