// HttpEndpoint: the one HTTP server type of both daemons (`ensembled run`'s /metrics and status
// page; `ensembled serve`'s runs, orchestrator/serve/serve_http.h): GET routes, each a function
// from the request to a reply, served on a bind address and port (service.http_bind, loopback
// by default; service.http_port).
//
// cpp-httplib's server runs on its own threads, under BindHttpServer's deadlines and limits
// (http_server_limits.h: slow clients cannot starve /metrics). What a route shows comes from
// the daemon's loop through a Published<View>: the latest view, swapped under a mutex.
// Thread-safe: Get() before Start(), routes on the server's threads, Publish() from the loop.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/base/status.h"
#include "orchestrator/service/run_snapshot.h"

namespace httplib {
class Server;
}

namespace ens {

struct RouteRequest {
  std::vector<std::string> matches;  // the route pattern's groups: [0] the whole path
  std::string authorization;         // the Authorization header ("" none)
};

struct RouteReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string www_authenticate;  // non-empty: sent as WWW-Authenticate (a 401)
  static RouteReply Html(std::string body) { return {200, "text/html; charset=utf-8", std::move(body), ""}; }
  static RouteReply Prometheus(std::string body) {
    return {200, "text/plain; version=0.0.4; charset=utf-8", std::move(body), ""};
  }
  static RouteReply Text(int status, std::string body) { return {status, "text/plain; charset=utf-8", std::move(body), ""}; }
};

// The latest view the daemon's loop published, for the server's threads.
template <class View>
class Published {
 public:
  explicit Published(View initial = View()) : latest_(std::move(initial)) {}
  void Publish(View view) {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = std::move(view);
  }
  View Latest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return latest_;
  }

 private:
  mutable std::mutex mu_;
  View latest_;
};

class HttpEndpoint {
 public:
  using Route = std::function<RouteReply(const RouteRequest&)>;
  HttpEndpoint();
  ~HttpEndpoint();  // stops the server and joins its thread
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;
  // GET `pattern` (a regular expression over the path; its groups in RouteRequest::matches).
  // REQUIRES: before Start().
  void Get(const std::string& pattern, Route route);
  // Binds and starts serving; fails (naming address and port) when the port is taken.
  Status Start(const std::string& bind, int port);

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

// A run's routes (`ensembled run`): /metrics (Prometheus) and / (the status page) of the latest
// RunSnapshot. REQUIRES: `snapshot` outlives `http`.
void AddRunRoutes(HttpEndpoint& http, const Published<RunSnapshot>& snapshot);

}  // namespace ens
