#include "orchestrator/serve/serve_http.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

#include "common/base/atomic_file.h"
#include "common/base/no_follow.h"
#include "common/state/run_layout.h"
#include "orchestrator/service/html_escape.h"
#include "orchestrator/service/prometheus_writer.h"
#include "orchestrator/serve/run_queue.h"
#include "orchestrator/service/run_snapshot.h"

namespace ens {
namespace {

using json = nlohmann::json;

std::string GrantText(const json& r) {
  if (r.value("state", "") == "rejected") return "-";
  return (r.value("granted", false) ? "" : "asks ") + r.value("resources", "?");
}

std::string Number(double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.6g", v);
  return b;
}

// A 120x24 SVG line of a run's ensemble error by round (the rounds its status.json holds: the
// last kRecentRounds; its last value in the tooltip); "-" when no round is committed.
std::string Sparkline(const json& curve) {
  if (!curve.is_array() || curve.empty()) return "-";
  std::vector<double> v;
  for (const json& x : curve) v.push_back(x.is_number() ? x.get<double>() : 0.0);
  const double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  const double w = 120, h = 24, pad = 2;
  std::string points;
  for (size_t i = 0; i < v.size(); ++i) {
    double x = v.size() == 1 ? w / 2 : pad + (w - 2 * pad) * static_cast<double>(i) / static_cast<double>(v.size() - 1);
    double y = hi > lo ? pad + (h - 2 * pad) * (hi - v[i]) / (hi - lo) : h / 2;
    points += (points.empty() ? "" : " ") + Number(x) + "," + Number(y);
  }
  std::string shape = v.size() == 1 ? "<circle cx=\"" + points.substr(0, points.find(',')) + "\" cy=\"" +
                                          points.substr(points.find(',') + 1) + "\" r=\"2\" fill=\"#1f77b4\"/>"
                                    : "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + points +
                                          "\"/>";
  return "<svg class=\"spark\" width=\"120\" height=\"24\"><title>ensemble error by round; last " + Number(v.back()) +
         "</title>" + shape + "</svg>";
}

}  // namespace

StatusOr<std::string> ReadStatusFile(const json& run) {
  // Its files are its runner's ("files_uid": the submitter, or the daemon): read through no
  // link, no FIFO, nobody else's file (common/base/no_follow.h).
  FileCheck check;
  if (run.contains("files_uid") && run["files_uid"].is_number_unsigned()) check.owner = run["files_uid"].get<uid_t>();
  else return Status::InvalidArgument("run " + run.value("name", "") + ": whose files are its is not known");
  return ReadNoFollow(RunLayout(run.value("state_dir", "")).StatusFile(), check);
}

json WithRunFiles(json runs) {
  for (json& r : runs) {
    if (!r.is_object() || r.value("state_dir", "").empty() || r.value("state", "") == "rejected") continue;
    auto text = ReadStatusFile(r);
    if (!text.ok()) continue;
    json st = json::parse(*text, nullptr, false);
    if (!st.is_object()) continue;  // being rewritten: no curve this time
    RunSnapshot snap = SnapshotFromJson(st);
    json curve = json::array();
    for (const RoundView& round : snap.rounds_done) curve.push_back(round.ensemble_error);
    r["error_curve"] = curve;
    json readings = json::array();
    for (const GpuView& g : snap.gpus)
      readings.push_back({{"uuid", g.uuid}, {"memory_used_mb", g.memory_used_mb}, {"utilization_pct", g.utilization_pct}});
    r["gpu_readings"] = readings;
  }
  return runs;
}

namespace {

// ensembled_runs: how many runs are in each state (every state named, 0 included).
void RunsByState(const json& runs, PrometheusWriter& w) {
  constexpr RunState kStates[] = {RunState::kQueued, RunState::kRunning,  RunState::kStopping,
                                  RunState::kPreempting, RunState::kFinished, RunState::kFailed,
                                  RunState::kCancelled, RunState::kRejected};
  std::map<std::string, int> by_state;
  for (RunState s : kStates) by_state[RunStateName(s)] = 0;
  for (const json& r : runs) ++by_state[r.value("state", "")];
  w.Family("ensembled_runs", "gauge", "Runs of this daemon by state.");
  for (RunState s : kStates)
    w.Sample("ensembled_runs", by_state[RunStateName(s)], std::string("state=\"") + RunStateName(s) + "\"");
}

// One family a run figure (state, rounds, members, grant, crashes), a sample per run that has it.
void PerRunSeries(const json& runs, PrometheusWriter& w) {
  struct Series {
    const char* name;
    const char* help;
    const char* key;  // the list entry's count, sampled when present ("": below)
  };
  const Series series[] = {
      {"ensembled_run_rounds_done", "Rounds the run has committed.", "rounds_done"},
      {"ensembled_run_rounds", "Rounds the run's config asks for.", "rounds"},
      {"ensembled_run_members_done", "Members of the run's current round finished.", "members_done"},
  };
  auto run_of = [](const json& r) { return "run=\"" + PrometheusLabel(r.value("name", "")) + "\""; };
  w.Family("ensembled_run_state", "gauge", "1 for the state a run is in.");
  for (const json& r : runs)
    w.Sample("ensembled_run_state", 1, run_of(r) + ",state=\"" + PrometheusLabel(r.value("state", "")) + "\"");
  for (const Series& s : series) {
    w.Family(s.name, "gauge", s.help);
    for (const json& r : runs)
      if (r.contains(s.key)) w.Sample(s.name, r.value(s.key, 0), run_of(r));
  }
  w.Family("ensembled_run_gpus_granted", "gauge", "GPUs the run holds now.");
  for (const json& r : runs) {
    const bool granted = r.value("granted", false);
    w.Sample("ensembled_run_gpus_granted", static_cast<double>(granted && r.contains("gpus") ? r["gpus"].size() : 0),
             run_of(r));
  }
  w.Family("ensembled_run_cpu_workers_granted", "gauge", "CPU worker slots the run holds now.");
  for (const json& r : runs)
    w.Sample("ensembled_run_cpu_workers_granted", r.value("granted", false) ? r.value("cpu_workers", 0) : 0, run_of(r));
  w.Family("ensembled_run_crashes", "gauge", "Crashes of the run in a row (restarts).");
  for (const json& r : runs) w.Sample("ensembled_run_crashes", r.value("crashes", 0), run_of(r));
  w.Family("ensembled_run_preemptions_total", "counter", "Times the run was preempted by a run of a higher priority.");
  for (const json& r : runs) w.Sample("ensembled_run_preemptions_total", r.value("preemptions", 0), run_of(r));
}

// The daemon's GPUs: which runs hold each (one given whole, or several with shares), and what
// the first holder's supervisor last read of it.
void GpuHolding(const json& runs, const json& gpus, PrometheusWriter& out) {
  std::map<std::string, std::vector<const json*>> holders;  // GPU id -> the runs holding it
  for (const json& r : runs)
    if (r.value("granted", false) && r.contains("gpus"))
      for (const json& g : r["gpus"])
        if (g.is_string()) holders[g.get<std::string>()].push_back(&r);
  int held = 0;
  PrometheusWriter granted, shared, memory, utilization;  // each family's samples, GPU by GPU
  for (const json& g : gpus) {
    const std::string id = g.value("id", "");
    const std::vector<const json*>& on = holders[id];
    held += !on.empty();
    auto labels_of = [&](const json* r) {
      return "gpu=\"" + PrometheusLabel(id) + "\",index=\"" + std::to_string(g.value("index", 0)) + "\",run=\"" +
             PrometheusLabel(r == nullptr ? "" : r->value("name", "")) + "\"";
    };
    if (on.empty()) granted.Sample("ensembled_gpu_granted", 0, labels_of(nullptr));
    uint64_t share_sum = 0;
    for (const json* r : on) {
      granted.Sample("ensembled_gpu_granted", 1, labels_of(r));
      share_sum += r->value("gpu_share_bytes", uint64_t{0});
    }
    shared.Sample("ensembled_gpu_shared_bytes", static_cast<double>(share_sum), "gpu=\"" + PrometheusLabel(id) + "\"");
    if (on.empty() || !on[0]->contains("gpu_readings")) continue;
    const std::string labels = labels_of(on[0]);
    for (const json& reading : (*on[0])["gpu_readings"]) {
      const std::string uuid = reading.value("uuid", "");
      if (uuid.empty() || (uuid != id && id.rfind(uuid, 0) != 0 && uuid.rfind(id, 0) != 0)) continue;
      if (reading.value("memory_used_mb", -1.0) >= 0)
        memory.Sample("ensembled_gpu_memory_used_mb", reading.value("memory_used_mb", -1.0), labels);
      if (reading.value("utilization_pct", -1) >= 0)
        utilization.Sample("ensembled_gpu_utilization_pct", reading.value("utilization_pct", -1), labels);
    }
  }
  out.Family("ensembled_gpus", "gauge", "The daemon's GPUs, held by a run or free.");
  out.Sample("ensembled_gpus", held, "state=\"granted\"");
  out.Sample("ensembled_gpus", static_cast<int>(gpus.size()) - held, "state=\"free\"");
  out.Family("ensembled_gpu_granted", "gauge", "1 for each run holding the GPU (its run label; several with shares), 0 for a free GPU.");
  out.Text(granted.str());
  out.Family("ensembled_gpu_shared_bytes", "gauge", "Bytes of the GPU granted as shares (resources.gpu_memory_gb).");
  out.Text(shared.str());
  out.Family("ensembled_gpu_memory_used_mb", "gauge", "GPU memory used, as the holding run's supervisor last sampled it.");
  out.Text(memory.str());
  out.Family("ensembled_gpu_utilization_pct", "gauge", "GPU utilisation, as the holding run's supervisor last sampled it.");
  out.Text(utilization.str());
}

}  // namespace

std::string RenderServeMetrics(const json& runs, const json& gpus) {
  PrometheusWriter w;
  RunsByState(runs, w);
  PerRunSeries(runs, w);
  if (!gpus.empty()) GpuHolding(runs, gpus, w);
  return w.str();
}

std::string RenderServePage(const json& runs) {
  std::string out =
      "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"10\">"
      "<title>ensembled serve</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
      "</style></head><body><h1>ensembled serve: " +
      std::to_string(runs.size()) + (runs.size() == 1 ? " run" : " runs") +
      "</h1><table><tr><th>name</th><th>state</th><th>priority</th><th>resources</th><th>rounds</th>"
      "<th>ensemble error</th><th>reason</th></tr>\n";
  for (const json& r : runs) {
    std::string rounds = r.contains("rounds") ? std::to_string(r.value("rounds_done", 0)) + "/" +
                                                    std::to_string(r.value("rounds", 0))
                                              : "-";
    // A rejected config: every error (the reason is the first); else the reason. All escaped.
    std::string reason = r.contains("errors") ? "" : HtmlEscape(r.value("reason", ""));
    if (r.contains("errors"))
      for (const json& e : r["errors"])
        reason += (reason.empty() ? "" : "<br>") + HtmlEscape(e.value("pointer", "") + ": " + e.value("message", ""));
    const std::string name = HtmlEscape(r.value("name", ""));
    const bool has_page = r.value("state", "") != "rejected";
    out += "<tr><td>" + (has_page ? "<a href=\"/runs/" + name + "\">" + name + "</a>" : name) + "</td><td>" +
           HtmlEscape(r.value("state", "")) + "</td><td>" + std::to_string(r.value("priority", 0)) + "</td><td>" +
           HtmlEscape(GrantText(r)) + "</td><td>" + rounds + "</td><td>" +
           Sparkline(r.contains("error_curve") ? r["error_curve"] : json()) + "</td><td>" +
           reason + "</td></tr>\n";
  }
  return out + "</table></body></html>\n";
}

std::string RenderServedRunPage(const json& run, const std::string& status_json) {
  const std::string queue_view = "<p><a href=\"/\">all runs</a> &middot; served: " + HtmlEscape(run.value("state", "")) +
                                 ", " + HtmlEscape(GrantText(run)) +
                                 (run.value("reason", "").empty() ? "" : " &middot; " + HtmlEscape(run.value("reason", ""))) + "</p>";
  json st = status_json.empty() ? json() : json::parse(status_json, nullptr, false);
  if (!st.is_object())
    return "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"10\">"
           "<title>ensembled: " + HtmlEscape(run.value("name", "")) + "</title></head><body style=\"font-family:sans-serif\"><h1>ensembled: " +
           HtmlEscape(run.value("name", "")) + "</h1>" + queue_view + "<p>Not started yet: no status.json in " +
           HtmlEscape(run.value("state_dir", "")) + ".</p></body></html>\n";
  std::string page = RenderStatusPage(SnapshotFromJson(st));
  if (size_t body = page.find("<body>"); body != std::string::npos) page.insert(body + 6, queue_view);
  return page;
}

bool BearerMatches(const std::string& header, const std::string& token) {
  const std::string prefix = "Bearer ";
  if (token.empty() || header.size() != prefix.size() + token.size() || header.compare(0, prefix.size(), prefix) != 0)
    return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < token.size(); ++i)
    diff |= static_cast<unsigned char>(header[prefix.size() + i] ^ token[i]);
  return diff == 0;
}

void AddServeRoutes(HttpEndpoint& http, const Published<json>& runs, ServeHttpOptions options) {
  auto opts = std::make_shared<const ServeHttpOptions>(std::move(options));
  http.Get("/metrics", [&runs, opts](const RouteRequest&) {
    return RouteReply::Prometheus(RenderServeMetrics(WithRunFiles(runs.Latest()), opts->gpus));
  });
  http.Get("/", [&runs](const RouteRequest&) { return RouteReply::Html(RenderServePage(WithRunFiles(runs.Latest()))); });
  http.Get(R"(/runs/([^/]+))", [&runs, opts](const RouteRequest& req) {
    const std::string name = req.matches.at(1);
    const std::string& token = opts->token;
    if (!token.empty() ? !BearerMatches(req.authorization, token) : !opts->pages_open) {
      RouteReply no = RouteReply::Text(token.empty() ? 403 : 401,
                                     "a run's page is its submitter's: `ensemblectl status --socket SOCKET " + name + "`" +
                                         (token.empty() ? " (or an http_token_file in the serve config)" : ", or this daemon's token") +
                                         "\n");
      if (!token.empty()) no.www_authenticate = "Bearer";
      return no;
    }
    for (const json& r : runs.Latest()) {
      if (r.value("name", "") != name || r.value("state", "") == "rejected") continue;
      auto text = r.value("state_dir", "").empty() ? StatusOr<std::string>(std::string()) : ReadStatusFile(r);
      return RouteReply::Html(RenderServedRunPage(r, text.ok() ? *text : ""));
    }
    return RouteReply::Text(404, "no run named '" + name + "' (see /)\n");
  });
}

}  // namespace ens
