// Tests of orchestrator/serve_http: the Prometheus text and the HTML list of a daemon's runs,
// from the list `ensemblectl list --json` gives; and both served by a real daemon.
#include "orchestrator/serve_http.h"

#include <catch2/catch.hpp>

#include "support/env_spawn_notify.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

json SomeRuns() {
  return json::parse(R"([
    {"name": "a", "state": "running", "priority": 0, "granted": true, "gpus": ["GPU-1", "GPU-2"], "cpu_workers": 0,
     "rounds_done": 1, "rounds": 3, "members_done": 4, "members": 8, "reason": ""},
    {"name": "b", "state": "queued", "priority": 5, "granted": false, "gpus": [], "cpu_workers": 2,
     "rounds": 1, "reason": "needs 2 CPU workers, 0 free", "crashes": 2},
    {"name": "we\"ird<x>", "state": "rejected", "priority": 0, "granted": false, "gpus": [], "cpu_workers": 0,
     "reason": "/rounds/count: must be an integer >= 1", "errors": [{"pointer": "/rounds/count", "message": "must be <1"}]}
  ])");
}

TEST_CASE("serve metrics count runs by state and label each run's series", "[serve][http]") {
  std::string m = RenderServeMetrics(SomeRuns());
  INFO(m);
  CHECK_THAT(m, Catch::Contains("ensembled_runs{state=\"running\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_runs{state=\"queued\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_runs{state=\"finished\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_state{run=\"a\",state=\"running\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_rounds_done{run=\"a\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_members_done{run=\"a\"} 4\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_gpus_granted{run=\"a\"} 2\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_cpu_workers_granted{run=\"b\"} 0\n"));  // asked, not granted
  CHECK_THAT(m, Catch::Contains("ensembled_run_crashes{run=\"b\"} 2\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_state{run=\"we\\\"ird<x>\",state=\"rejected\"} 1\n"));
  CHECK(m.find("ensembled_run_rounds_done{run=\"b\"}") == std::string::npos);  // b has committed nothing to show
}

TEST_CASE("the serve page lists every run with its reason and errors escaped", "[serve][http]") {
  std::string p = RenderServePage(SomeRuns());
  CHECK_THAT(p, Catch::Contains("3 runs"));
  CHECK_THAT(p, Catch::Contains("<td>a</td><td>running</td><td>0</td><td>2 GPU</td><td>1/3</td>"));
  CHECK_THAT(p, Catch::Contains("asks 2 CPU worker(s)"));
  CHECK_THAT(p, Catch::Contains("needs 2 CPU workers, 0 free"));
  CHECK_THAT(p, Catch::Contains("we&quot;ird&lt;x&gt;"));
  CHECK_THAT(p, Catch::Contains("/rounds/count: must be &lt;1"));
  CHECK(p.find("<x>") == std::string::npos);
}

TEST_CASE("a daemon with http_port serves the list and the metrics of its runs", "[serve][integration][http]") {
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  ServeDaemonHarness d(2, "\"none\"", ", \"http_port\": " + std::to_string(port));
  WriteText(d.runs_dir() + "/one.json", TinyRunConfig("one"));
  WriteText(d.runs_dir() + "/bad.json", TinyRunConfig("bad", 0));
  d.Start();
  d.WaitForState("one", "finished", 60);
  HttpReply metrics;
  d.WaitUntil([&] {
    metrics = HttpGet("127.0.0.1", port, "/metrics");
    return metrics.body.find("ensembled_runs{state=\"finished\"} 1") != std::string::npos;
  }, 20, "/metrics showing one finished run");
  CHECK_THAT(metrics.body, Catch::Contains("ensembled_runs{state=\"rejected\"} 1"));
  CHECK_THAT(metrics.body, Catch::Contains("ensembled_run_rounds_done{run=\"one\"} 1"));
  auto page = HttpGet("127.0.0.1", port, "/");
  CHECK(page.status == 200);
  CHECK_THAT(page.body, Catch::Contains("<td>one</td><td>finished</td>"));
  CHECK_THAT(page.body, Catch::Contains("/resources/cpu_workers"));
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
