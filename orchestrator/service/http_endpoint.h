// HttpEndpoint: Prometheus /metrics and the status page (/) on a loopback port.
//
// Off unless service.http_port is set. Runs cpp-httplib's server on its own threads, under
// BindHttpServer's deadlines and limits (http_server_limits.h: slow clients cannot starve
// /metrics); the only thing it shares with the supervisor loop is the latest RunSnapshot,
// swapped under a mutex by Publish(). Thread-safe: Publish from the loop, requests on the
// server's threads.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/base/status.h"
#include "orchestrator/service/run_snapshot.h"

namespace httplib {
class Server;
}

namespace ens {

class HttpEndpoint {
 public:
  HttpEndpoint();
  ~HttpEndpoint();
  // Binds and starts serving; fails (naming address and port) when the port is taken.
  Status Start(const std::string& bind, int port);
  void Publish(RunSnapshot snapshot);

 private:
  RunSnapshot Latest();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  std::mutex mu_;
  RunSnapshot latest_;
};

}  // namespace ens
