#include "orchestrator/serve/serve_http.h"

#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "common/base/atomic_file.h"
#include "common/base/no_follow.h"
#include "common/state/run_layout.h"
#include "orchestrator/service/http_server_limits.h"
#include "orchestrator/serve/run_queue.h"
#include "orchestrator/service/run_snapshot.h"

namespace ens {
namespace {

using json = nlohmann::json;

// A Prometheus label value: backslash, quote and newline escaped (a rejected file's name is
// whatever the file was called).
std::string Label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Html(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

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
std::string RunsByState(const json& runs) {
  constexpr RunState kStates[] = {RunState::kQueued, RunState::kRunning,  RunState::kStopping,
                                  RunState::kPreempting, RunState::kFinished, RunState::kFailed,
                                  RunState::kCancelled, RunState::kRejected};
  std::map<std::string, int> by_state;
  for (RunState s : kStates) by_state[RunStateName(s)] = 0;
  for (const json& r : runs) ++by_state[r.value("state", "")];
  std::string out = "# HELP ensembled_runs Runs of this daemon by state.\n# TYPE ensembled_runs gauge\n";
  for (RunState s : kStates)
    out += std::string("ensembled_runs{state=\"") + RunStateName(s) + "\"} " + std::to_string(by_state[RunStateName(s)]) + "\n";
  return out;
}

// One family a run figure (state, rounds, members, grant, crashes), a sample per run that has it.
std::string PerRunSeries(const json& runs) {
  std::string out;
  struct Series {
    const char* name;
    const char* help;
  };
  const Series series[] = {
      {"ensembled_run_state", "1 for the state a run is in."},
      {"ensembled_run_rounds_done", "Rounds the run has committed."},
      {"ensembled_run_rounds", "Rounds the run's config asks for."},
      {"ensembled_run_members_done", "Members of the run's current round finished."},
      {"ensembled_run_gpus_granted", "GPUs the run holds now."},
      {"ensembled_run_cpu_workers_granted", "CPU worker slots the run holds now."},
      {"ensembled_run_crashes", "Crashes of the run in a row (restarts)."},
  };
  for (const Series& s : series) {
    out += std::string("# HELP ") + s.name + " " + s.help + "\n# TYPE " + s.name + " gauge\n";
    for (const json& r : runs) {
      std::string run = "run=\"" + Label(r.value("name", "")) + "\"";
      std::string n = s.name;
      bool granted = r.value("granted", false);
      if (n == "ensembled_run_state") {
        out += n + "{" + run + ",state=\"" + Label(r.value("state", "")) + "\"} 1\n";
      } else if (n == "ensembled_run_rounds_done" && r.contains("rounds_done")) {
        out += n + "{" + run + "} " + std::to_string(r.value("rounds_done", 0)) + "\n";
      } else if (n == "ensembled_run_rounds" && r.contains("rounds")) {
        out += n + "{" + run + "} " + std::to_string(r.value("rounds", 0)) + "\n";
      } else if (n == "ensembled_run_members_done" && r.contains("members_done")) {
        out += n + "{" + run + "} " + std::to_string(r.value("members_done", 0)) + "\n";
      } else if (n == "ensembled_run_gpus_granted") {
        out += n + "{" + run + "} " + std::to_string(granted && r.contains("gpus") ? r["gpus"].size() : 0) + "\n";
      } else if (n == "ensembled_run_cpu_workers_granted") {
        out += n + "{" + run + "} " + std::to_string(granted ? r.value("cpu_workers", 0) : 0) + "\n";
      } else if (n == "ensembled_run_crashes") {
        out += n + "{" + run + "} " + std::to_string(r.value("crashes", 0)) + "\n";
      }
    }
  }
  out += "# HELP ensembled_run_preemptions_total Times the run was preempted by a run of a higher priority.\n"
         "# TYPE ensembled_run_preemptions_total counter\n";
  for (const json& r : runs)
    out += "ensembled_run_preemptions_total{run=\"" + Label(r.value("name", "")) + "\"} " +
           std::to_string(r.value("preemptions", 0)) + "\n";
  return out;
}

// The daemon's GPUs: which runs hold each (one given whole, or several with shares), and what
// the first holder's supervisor last read of it.
std::string GpuHolding(const json& runs, const json& gpus) {
  std::map<std::string, std::vector<const json*>> holders;  // GPU id -> the runs holding it
  for (const json& r : runs)
    if (r.value("granted", false) && r.contains("gpus"))
      for (const json& g : r["gpus"])
        if (g.is_string()) holders[g.get<std::string>()].push_back(&r);
  int held = 0;
  std::string granted, shared, memory, utilization;
  for (const json& g : gpus) {
    const std::string id = g.value("id", "");
    const std::vector<const json*>& on = holders[id];
    held += !on.empty();
    auto labels_of = [&](const json* r) {
      return "gpu=\"" + Label(id) + "\",index=\"" + std::to_string(g.value("index", 0)) + "\",run=\"" +
             Label(r == nullptr ? "" : r->value("name", "")) + "\"";
    };
    if (on.empty()) granted += "ensembled_gpu_granted{" + labels_of(nullptr) + "} 0\n";
    uint64_t share_sum = 0;
    for (const json* r : on) {
      granted += "ensembled_gpu_granted{" + labels_of(r) + "} 1\n";
      share_sum += r->value("gpu_share_bytes", uint64_t{0});
    }
    shared += "ensembled_gpu_shared_bytes{gpu=\"" + Label(id) + "\"} " + std::to_string(share_sum) + "\n";
    if (on.empty() || !on[0]->contains("gpu_readings")) continue;
    const std::string labels = labels_of(on[0]);
    for (const json& reading : (*on[0])["gpu_readings"]) {
      const std::string uuid = reading.value("uuid", "");
      if (uuid.empty() || (uuid != id && id.rfind(uuid, 0) != 0 && uuid.rfind(id, 0) != 0)) continue;
      if (reading.value("memory_used_mb", -1.0) >= 0)
        memory += "ensembled_gpu_memory_used_mb{" + labels + "} " + Number(reading.value("memory_used_mb", -1.0)) + "\n";
      if (reading.value("utilization_pct", -1) >= 0)
        utilization += "ensembled_gpu_utilization_pct{" + labels + "} " + std::to_string(reading.value("utilization_pct", -1)) + "\n";
    }
  }
  std::string out = "# HELP ensembled_gpus The daemon's GPUs, held by a run or free.\n# TYPE ensembled_gpus gauge\n";
  out += "ensembled_gpus{state=\"granted\"} " + std::to_string(held) + "\n";
  out += "ensembled_gpus{state=\"free\"} " + std::to_string(static_cast<int>(gpus.size()) - held) + "\n";
  out += "# HELP ensembled_gpu_granted 1 for each run holding the GPU (its run label; several with shares), "
         "0 for a free GPU.\n# TYPE ensembled_gpu_granted gauge\n" + granted;
  out += "# HELP ensembled_gpu_shared_bytes Bytes of the GPU granted as shares (resources.gpu_memory_gb).\n"
         "# TYPE ensembled_gpu_shared_bytes gauge\n" + shared;
  out += "# HELP ensembled_gpu_memory_used_mb GPU memory used, as the holding run's supervisor last sampled it.\n"
         "# TYPE ensembled_gpu_memory_used_mb gauge\n" + memory;
  out += "# HELP ensembled_gpu_utilization_pct GPU utilisation, as the holding run's supervisor last sampled it.\n"
         "# TYPE ensembled_gpu_utilization_pct gauge\n" + utilization;
  return out;
}

}  // namespace

std::string RenderServeMetrics(const json& runs, const json& gpus) {
  std::string out = RunsByState(runs) + PerRunSeries(runs);
  if (gpus.empty()) return out;
  return out + GpuHolding(runs, gpus);
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
    std::string reason = r.contains("errors") ? "" : Html(r.value("reason", ""));
    if (r.contains("errors"))
      for (const json& e : r["errors"])
        reason += (reason.empty() ? "" : "<br>") + Html(e.value("pointer", "") + ": " + e.value("message", ""));
    const std::string name = Html(r.value("name", ""));
    const bool has_page = r.value("state", "") != "rejected";
    out += "<tr><td>" + (has_page ? "<a href=\"/runs/" + name + "\">" + name + "</a>" : name) + "</td><td>" +
           Html(r.value("state", "")) + "</td><td>" + std::to_string(r.value("priority", 0)) + "</td><td>" +
           Html(GrantText(r)) + "</td><td>" + rounds + "</td><td>" +
           Sparkline(r.contains("error_curve") ? r["error_curve"] : json()) + "</td><td>" +
           reason + "</td></tr>\n";
  }
  return out + "</table></body></html>\n";
}

std::string RenderServedRunPage(const json& run, const std::string& status_json) {
  const std::string queue_view = "<p><a href=\"/\">all runs</a> &middot; served: " + Html(run.value("state", "")) +
                                 ", " + Html(GrantText(run)) +
                                 (run.value("reason", "").empty() ? "" : " &middot; " + Html(run.value("reason", ""))) + "</p>";
  json st = status_json.empty() ? json() : json::parse(status_json, nullptr, false);
  if (!st.is_object())
    return "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"10\">"
           "<title>ensembled: " + Html(run.value("name", "")) + "</title></head><body style=\"font-family:sans-serif\"><h1>ensembled: " +
           Html(run.value("name", "")) + "</h1>" + queue_view + "<p>Not started yet: no status.json in " +
           Html(run.value("state_dir", "")) + ".</p></body></html>\n";
  std::string page = RenderStatusPage(SnapshotFromJson(st));
  if (size_t body = page.find("<body>"); body != std::string::npos) page.insert(body + 6, queue_view);
  return page;
}

ServeHttpEndpoint::ServeHttpEndpoint() : server_(std::make_unique<httplib::Server>()) {}

ServeHttpEndpoint::~ServeHttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

json ServeHttpEndpoint::Latest() {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void ServeHttpEndpoint::Publish(json runs) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(runs);
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

Status ServeHttpEndpoint::Start(const std::string& bind, int port, json gpus, std::string token, bool pages_open) {
  gpus_ = std::move(gpus);  // before the server thread starts; never written again
  token_ = std::move(token);
  pages_open_ = pages_open;
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderServeMetrics(WithRunFiles(Latest()), gpus_), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderServePage(WithRunFiles(Latest())), "text/html; charset=utf-8");
  });
  server_->Get(R"(/runs/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    if (!token_.empty() ? !BearerMatches(req.get_header_value("Authorization"), token_) : !pages_open_) {
      res.status = token_.empty() ? 403 : 401;
      if (!token_.empty()) res.set_header("WWW-Authenticate", "Bearer");
      res.set_content("a run's page is its submitter's: `ensemblectl status --socket SOCKET " + name + "`" +
                          (token_.empty() ? " (or an http_token_file in the serve config)" : ", or this daemon's token") + "\n",
                      "text/plain; charset=utf-8");
      return;
    }
    for (const json& r : Latest()) {
      if (r.value("name", "") != name || r.value("state", "") == "rejected") continue;
      auto text = r.value("state_dir", "").empty() ? StatusOr<std::string>(std::string()) : ReadStatusFile(r);
      res.set_content(RenderServedRunPage(r, text.ok() ? *text : ""), "text/html; charset=utf-8");
      return;
    }
    res.status = 404;
    res.set_content("no run named '" + name + "' (see /)\n", "text/plain; charset=utf-8");
  });
  // Deadlines, threads and backlog so slow clients cannot starve /metrics; SO_REUSEADDR only.
  if (Status s = BindHttpServer(*server_, bind, port); !s.ok()) return s;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

}  // namespace ens
