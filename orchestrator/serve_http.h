// ServeHttpEndpoint: `ensembled serve`'s runs over HTTP (serve config service.http_port; off
// when 0; service.http_bind, loopback by default, no authentication):
//   /         an HTML table of every run: name, state, priority, grant, progress, reason
//   /metrics  Prometheus text: ensembled_runs{state=...} (the queue) and each run's series
//             with a run label (state, rounds and members done, GPUs and CPU workers granted,
//             crashes in a row)
// cpp-httplib serves on its own thread; all it shares with the daemon's loop is the latest
// list of runs (the "runs" of `ensemblectl list --json`), swapped under a mutex by Publish().
// Thread-safe: Publish from the loop, requests on the server thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace httplib {
class Server;
}

namespace ens {

class ServeHttpEndpoint {
 public:
  ServeHttpEndpoint();
  ~ServeHttpEndpoint();
  // Binds and starts serving; fails (naming address and port) when the port is taken.
  Status Start(const std::string& bind, int port);
  void Publish(nlohmann::json runs);

 private:
  nlohmann::json Latest();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  nlohmann::json latest_ = nlohmann::json::array();
};

// The two views of a list of runs (pure; tests/serve_http_test.cpp).
std::string RenderServeMetrics(const nlohmann::json& runs);
std::string RenderServePage(const nlohmann::json& runs);

}  // namespace ens
