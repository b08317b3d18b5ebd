#include "orchestrator/serve_http.h"

#include <httplib.h>

#include <map>

#include "orchestrator/run_queue.h"

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
  std::string g = r.contains("gpus") && !r["gpus"].empty()
                      ? std::to_string(r["gpus"].size()) + " GPU"
                      : std::to_string(r.value("cpu_workers", 0)) + " CPU worker(s)";
  return r.value("granted", false) ? g : r.value("state", "") == "rejected" ? "-" : "asks " + g;
}

}  // namespace

std::string RenderServeMetrics(const json& runs) {
  constexpr RunState kStates[] = {RunState::kQueued,   RunState::kRunning,   RunState::kStopping, RunState::kFinished,
                                  RunState::kFailed,   RunState::kCancelled, RunState::kRejected};
  std::map<std::string, int> by_state;
  for (RunState s : kStates) by_state[RunStateName(s)] = 0;
  for (const json& r : runs) ++by_state[r.value("state", "")];
  std::string out = "# HELP ensembled_runs Runs of this daemon by state.\n# TYPE ensembled_runs gauge\n";
  for (RunState s : kStates)
    out += std::string("ensembled_runs{state=\"") + RunStateName(s) + "\"} " + std::to_string(by_state[RunStateName(s)]) + "\n";
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
  return out;
}

std::string RenderServePage(const json& runs) {
  std::string out =
      "<!doctype html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"10\">"
      "<title>ensembled serve</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
      "</style></head><body><h1>ensembled serve: " +
      std::to_string(runs.size()) +
      " runs</h1><table><tr><th>name</th><th>state</th><th>priority</th><th>resources</th><th>rounds</th>"
      "<th>reason</th></tr>\n";
  for (const json& r : runs) {
    std::string rounds = r.contains("rounds") ? std::to_string(r.value("rounds_done", 0)) + "/" +
                                                    std::to_string(r.value("rounds", 0))
                                              : "-";
    std::string reason = r.value("reason", "");
    if (r.contains("errors"))
      for (const json& e : r["errors"]) reason += "<br>" + Html(e.value("pointer", "") + ": " + e.value("message", ""));
    out += "<tr><td>" + Html(r.value("name", "")) + "</td><td>" + Html(r.value("state", "")) + "</td><td>" +
           std::to_string(r.value("priority", 0)) + "</td><td>" + Html(GrantText(r)) + "</td><td>" + rounds + "</td><td>" +
           (r.contains("errors") ? reason : Html(reason)) + "</td></tr>\n";
  }
  return out + "</table></body></html>\n";
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

Status ServeHttpEndpoint::Start(const std::string& bind, int port) {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderServeMetrics(Latest()), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderServePage(Latest()), "text/html; charset=utf-8");
  });
  // As HttpEndpoint: no SO_REUSEPORT, so two daemons cannot share a port.
  server_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  if (!server_->bind_to_port(bind.c_str(), port))
    return Status::IOError("cannot listen on " + bind + ":" + std::to_string(port) + " (address in use?)");
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

}  // namespace ens
