#include "orchestrator/service/http_endpoint.h"

#include <httplib.h>

#include "orchestrator/service/http_server_limits.h"

namespace ens {

HttpEndpoint::HttpEndpoint() : server_(std::make_unique<httplib::Server>()) {}

HttpEndpoint::~HttpEndpoint() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

RunSnapshot HttpEndpoint::Latest() {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void HttpEndpoint::Publish(RunSnapshot snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  latest_ = std::move(snapshot);
}

Status HttpEndpoint::Start(const std::string& bind, int port) {
  server_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderPrometheus(Latest()), "text/plain; version=0.0.4; charset=utf-8");
  });
  server_->Get("/", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(RenderStatusPage(Latest()), "text/html; charset=utf-8");
  });
  // Deadlines, threads and backlog so slow clients cannot starve /metrics; SO_REUSEADDR only.
  if (Status s = BindHttpServer(*server_, bind, port); !s.ok()) return s;
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return Status::Ok();
}

}  // namespace ens
