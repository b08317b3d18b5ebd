// ServeHttpEndpoint: `ensembled serve`'s runs over HTTP (serve config service.http_port; off
// when 0; service.http_bind, loopback by default). Without authentication it serves what
// `ensemblectl list` shows anyone (/ and /metrics); a run's page (/runs/NAME) needs the token
// of http_token_file ("Authorization: Bearer <token>"), or, with no token configured, is open
// under run_as "daemon" (where `status` is anyone's) and closed under "submitter" (a run's
// details are its submitter's: `ensemblectl status`, checked by the socket's peer uid):
//   /           an HTML table of every run: name (a link to its page), state, priority, grant,
//               progress, a small plot of its ensemble error by round, reason
//   /runs/NAME  the run's status page (the one `ensembled run` serves), from its status.json
//               (the live view its supervisor rewrites every second; the per-member loss
//               curves are on the run's own page only); a run not started yet: its queue view
//   /metrics    Prometheus text: ensembled_runs{state=...} (the queue), each run's series with
//               a run label (state, rounds and members done, GPUs and CPU workers granted,
//               crashes in a row), and the daemon's GPUs (which run holds each; memory and
//               utilisation as the holding run's supervisor last sampled them)
// cpp-httplib serves on its own threads, under BindHttpServer's deadlines and limits
// (http_server_limits.h); all it shares with the daemon's loop is the latest
// list of runs (the "runs" of `ensemblectl list --json`), swapped under a mutex by Publish(),
// and the daemon's GPUs, set once before Start(). The run files (status.json) are read on the
// server's threads, per request. Thread-safe: Publish from the loop, requests on the server's
// threads.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/base/status.h"

namespace httplib {
class Server;
}

namespace ens {

class ServeHttpEndpoint {
 public:
  ServeHttpEndpoint();
  ~ServeHttpEndpoint();
  // Binds and starts serving; fails (naming address and port) when the port is taken.
  // `gpus`: the daemon's GPUs, [{"id": UUID or index, "index": n}], [] without.
  // `token`: what a run's page needs ("" none); `pages_open`: with no token, whether run pages
  // are served to anyone.
  Status Start(const std::string& bind, int port, nlohmann::json gpus = nlohmann::json::array(),
               std::string token = "", bool pages_open = true);
  void Publish(nlohmann::json runs);

 private:
  nlohmann::json Latest();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  nlohmann::json latest_ = nlohmann::json::array();
  nlohmann::json gpus_ = nlohmann::json::array();
  std::string token_;
  bool pages_open_ = true;
};

// Whether an Authorization header value carries `token` ("Bearer <token>"), compared in time
// that does not depend on where they differ. False for an empty token.
bool BearerMatches(const std::string& header, const std::string& token);

// A run's status.json (`run`: an item of `ensemblectl list --json`'s runs), read as its
// "files_uid"'s file through no link (common/base/no_follow.h); an error without files_uid.
StatusOr<std::string> ReadStatusFile(const nlohmann::json& run);
// Each run of `runs` with what its state directory's status.json adds: "error_curve" (the
// ensemble's holdout error of each committed round: RMSE, or the fraction misclassified) and
// "gpu_readings" (its supervisor's GPU samples: uuid, memory_used_mb, utilization_pct).
nlohmann::json WithRunFiles(nlohmann::json runs);
// The views of a list of runs (pure over WithRunFiles' output; tests/serve_http_test.cpp).
// `gpus`: as Start's.
std::string RenderServeMetrics(const nlohmann::json& runs, const nlohmann::json& gpus = nlohmann::json::array());
std::string RenderServePage(const nlohmann::json& runs);
// /runs/NAME: the status page of `run` (one item of `runs`) from its status.json text
// (`status_json` "": not started yet; its queue view alone).
std::string RenderServedRunPage(const nlohmann::json& run, const std::string& status_json);

}  // namespace ens
