// BindHttpServer (orchestrator/service/http_server_limits.h) on both daemons' HTTP servers, in
// process: clients that send half a request and wait delay neither /metrics nor each other's
// connects, and none holds its connection past the read timeout.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "orchestrator/service/http_endpoint.h"
#include "orchestrator/service/http_server_limits.h"
#include "orchestrator/serve/serve_http.h"
#include "support/env_spawn_notify.h"

namespace ens {
namespace {

using namespace ens::testing;

int ConnectTcp(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closes `fd` (EOF or reset) before the deadline.
bool ClosedBy(int fd, SteadyClock::time_point deadline) {
  char buf[4096];
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count());
    if (left <= 0) return false;
    struct pollfd p {fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return false;
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
}

// With `slow` clients holding half a request each: how long GET /metrics takes, and whether
// every slow client was closed within twice the timeout (and a little) of its connect: its 400
// after the read timeout, the close after the keep-alive wait that follows.
void CheckSlowClients(int port, int slow) {
  REQUIRE(WaitUntil(5, [&] { return HttpGet("127.0.0.1", port, "/metrics", 1000).ok; }));
  std::vector<std::pair<int, SteadyClock::time_point>> clients;
  const std::string half = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  auto c0 = SteadyClock::now();
  for (int i = 0; i < slow; ++i) {
    int fd = ConnectTcp(port);
    REQUIRE(fd >= 0);
    REQUIRE(::send(fd, half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
    clients.emplace_back(fd, SteadyClock::now());
  }
  // A burst of connects does not overflow the listen backlog (no SYN retransmits, 1 s each).
  double connects_ms = SecondsSince(c0) * 1000;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // each taken by a thread
  auto t0 = SteadyClock::now();
  HttpReply r = HttpGet("127.0.0.1", port, "/metrics", 10000);
  double ms = SecondsSince(t0) * 1000;
  INFO(slow << " slow clients connected in " << connects_ms << " ms; then GET /metrics took " << ms << " ms ("
            << r.error << ")");
  CHECK(connects_ms < 500);
  CHECK(r.ok);
  CHECK(r.status == 200);
  CHECK(ms < 500);
  int closed = 0;
  for (auto [fd, connected] : clients) {
    closed += ClosedBy(fd, connected + std::chrono::milliseconds(2 * kHttpTimeoutS * 1000 + 1500)) ? 1 : 0;
    ::close(fd);
  }
  CHECK(closed == slow);
}

TEST_CASE("a run's HTTP endpoint: 40 half requests leave /metrics answered at once, and are closed",
          "[http][http_server_limits]") {
  Published<RunSnapshot> snapshot;
  HttpEndpoint http;
  AddRunRoutes(http, snapshot);
  int port = FreeTcpPort();
  REQUIRE(http.Start("127.0.0.1", port).ok());
  CheckSlowClients(port, 40);
}

TEST_CASE("the serve daemon's HTTP endpoint: 40 half requests leave /metrics answered at once, and are closed",
          "[http][http_server_limits]") {
  Published<nlohmann::json> runs(nlohmann::json::array());
  HttpEndpoint http;
  AddServeRoutes(http, runs, {});
  int port = FreeTcpPort();
  REQUIRE(http.Start("127.0.0.1", port).ok());
  CheckSlowClients(port, 40);
}

}  // namespace
}  // namespace ens
