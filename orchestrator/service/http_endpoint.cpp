#include "orchestrator/service/http_endpoint.h"

#include <httplib.h>

#include "orchestrator/service/http_server_limits.h"

namespace ens {

HttpEndpoint::HttpEndpoint() : server_(std::make_unique<httplib::Server>()) {}

HttpEndpoint::~HttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpEndpoint::Get(const std::string& pattern, Route route) {
  server_->Get(pattern, [route = std::move(route)](const httplib::Request& req, httplib::Response& res) {
    RouteRequest request;
    for (const auto& m : req.matches) request.matches.push_back(m);
    request.authorization = req.get_header_value("Authorization");
    RouteReply reply = route(request);
    res.status = reply.status;
    if (!reply.www_authenticate.empty()) res.set_header("WWW-Authenticate", reply.www_authenticate);
    res.set_content(reply.body, reply.content_type.c_str());
  });
}

Status HttpEndpoint::Start(const std::string& bind, int port) {
  // Deadlines, threads and backlog so slow clients cannot starve /metrics; SO_REUSEADDR only.
  if (Status s = BindHttpServer(*server_, bind, port); !s.ok()) return s;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

void AddRunRoutes(HttpEndpoint& http, const Published<RunSnapshot>& snapshot) {
  http.Get("/metrics", [&snapshot](const RouteRequest&) { return RouteReply::Prometheus(RenderPrometheus(snapshot.Latest())); });
  http.Get("/", [&snapshot](const RouteRequest&) { return RouteReply::Html(RenderStatusPage(snapshot.Latest())); });
}

}  // namespace ens
