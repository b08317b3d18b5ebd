// ServeHttp: `ensembled serve`'s runs over HTTP, as routes of an HttpEndpoint (the one server
// type, orchestrator/service/http_endpoint.h) (serve config service.http_port; off
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
// The routes run on the server's threads; all they share with the daemon's loop is the latest
// list of runs (the "runs" of `ensemblectl list --json`), a Published<json> the loop publishes,
// and the daemon's GPUs, given once before Start(). The run files (status.json) are read on the
// server's threads, per request.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/base/status.h"
#include "orchestrator/service/http_endpoint.h"

namespace ens {

// The settings of the daemon's HTTP routes.
struct ServeHttpOptions {
  nlohmann::json gpus = nlohmann::json::array();  // the daemon's GPUs, [{"id": UUID or index, "index": n}]
  std::string token;                              // what a run's page needs ("" none)
  bool pages_open = true;                         // with no token: whether run pages are anyone's
};

// Adds /, /runs/NAME and /metrics over `runs` to `http`. REQUIRES: `runs` outlives `http`;
// before http.Start().
void AddServeRoutes(HttpEndpoint& http, const Published<nlohmann::json>& runs, ServeHttpOptions options);

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
