// Tests of orchestrator/serve_http: the Prometheus text and the HTML list of a daemon's runs,
// from the list `ensemblectl list --json` gives; and both served by a real daemon.
#include "orchestrator/serve/serve_http.h"

#include <catch2/catch.hpp>

#include "orchestrator/service/run_snapshot.h"

#include "support/env_spawn_notify.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

json SomeRuns() {
  return json::parse(R"json([
    {"name": "a", "state": "running", "priority": 0, "granted": true, "gpus": ["GPU-1", "GPU-2"], "cpu_workers": 0,
     "resources": "2 GPUs (GPU-1, GPU-2)",
     "rounds_done": 1, "rounds": 3, "members_done": 4, "members": 8, "reason": ""},
    {"name": "b", "state": "queued", "priority": 5, "granted": false, "gpus": [], "cpu_workers": 2,
     "resources": "2 CPU workers",
     "rounds": 1, "reason": "needs 2 CPU workers, 0 free", "crashes": 2, "preemptions": 3},
    {"name": "we\"ird<x>", "state": "rejected", "priority": 0, "granted": false, "gpus": [], "cpu_workers": 0,
     "reason": "/rounds/count: must be an integer >= 1", "errors": [{"pointer": "/rounds/count", "message": "must be <1"}]}
  ])json");
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
  CHECK_THAT(m, Catch::Contains("# TYPE ensembled_run_preemptions_total counter\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_preemptions_total{run=\"b\"} 3\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_preemptions_total{run=\"a\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_runs{state=\"preempting\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_run_state{run=\"we\\\"ird<x>\",state=\"rejected\"} 1\n"));
  CHECK(m.find("ensembled_run_rounds_done{run=\"b\"}") == std::string::npos);  // b has committed nothing to show
}

TEST_CASE("the serve page lists every run with its reason and errors escaped", "[serve][http]") {
  std::string p = RenderServePage(SomeRuns());
  CHECK_THAT(p, Catch::Contains("3 runs"));
  CHECK_THAT(p, Catch::Contains("<td><a href=\"/runs/a\">a</a></td><td>running</td><td>0</td><td>2 GPUs (GPU-1, GPU-2)</td><td>1/3</td>"));
  CHECK_THAT(p, Catch::Contains("asks 2 CPU workers"));
  CHECK_THAT(p, Catch::Contains("needs 2 CPU workers, 0 free"));
  CHECK_THAT(p, Catch::Contains("we&quot;ird&lt;x&gt;"));
  CHECK_THAT(p, Catch::Contains("/rounds/count: must be &lt;1"));
  CHECK(p.find("<x>") == std::string::npos);
}

TEST_CASE("the serve page links each run to its page and plots its ensemble error by round", "[serve][http]") {
  json runs = SomeRuns();
  runs[0]["error_curve"] = {1.5, 1.2, 0.9};
  runs[1]["error_curve"] = {0.4};
  std::string p = RenderServePage(runs);
  CHECK_THAT(p, Catch::Contains("<a href=\"/runs/a\">a</a>"));
  CHECK_THAT(p, Catch::Contains("<polyline"));
  CHECK_THAT(p, Catch::Contains("points=\"2,2 60,12 118,22\""));  // the highest error at the top
  CHECK_THAT(p, Catch::Contains("last 0.9"));
  CHECK_THAT(p, Catch::Contains("<circle cx=\"60\" cy=\"12\""));  // one round: a dot
  CHECK(p.find("href=\"/runs/we") == std::string::npos);  // a rejected file has no page
}

TEST_CASE("serve metrics say which run holds each GPU and what it last read of it", "[serve][http]") {
  json runs = SomeRuns();
  runs[0]["gpu_readings"] = {{{"uuid", "GPU-1"}, {"memory_used_mb", 1536.0}, {"utilization_pct", 40}},
                             {{"uuid", "GPU-2"}, {"memory_used_mb", -1.0}, {"utilization_pct", -1}}};
  json gpus = {{{"id", "GPU-1"}, {"index", 0}}, {{"id", "GPU-2"}, {"index", 1}}, {{"id", "GPU-3"}, {"index", 2}}};
  std::string m = RenderServeMetrics(runs, gpus);
  INFO(m);
  CHECK_THAT(m, Catch::Contains("ensembled_gpus{state=\"granted\"} 2\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpus{state=\"free\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_granted{gpu=\"GPU-1\",index=\"0\",run=\"a\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_granted{gpu=\"GPU-3\",index=\"2\",run=\"\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_memory_used_mb{gpu=\"GPU-1\",index=\"0\",run=\"a\"} 1536\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_utilization_pct{gpu=\"GPU-1\",index=\"0\",run=\"a\"} 40\n"));
  CHECK(m.find("ensembled_gpu_memory_used_mb{gpu=\"GPU-2\"") == std::string::npos);  // no reading: no sample
  CHECK(RenderServeMetrics(runs).find("ensembled_gpus") == std::string::npos);        // a daemon without GPUs
}

TEST_CASE("serve metrics list every run holding a shared GPU and the bytes shared", "[serve][http][share]") {
  json runs = json::parse(R"json([
    {"name": "s1", "state": "running", "granted": true, "gpus": ["GPU-1"], "gpu_share_bytes": 4294967296},
    {"name": "s2", "state": "preempting", "granted": true, "gpus": ["GPU-1"], "gpu_share_bytes": 2147483648},
    {"name": "w", "state": "queued", "granted": false, "gpus": ["GPU-2"], "gpu_share_bytes": 0}
  ])json");
  json gpus = {{{"id", "GPU-1"}, {"index", 0}}, {{"id", "GPU-2"}, {"index", 1}}};
  std::string m = RenderServeMetrics(runs, gpus);
  INFO(m);
  CHECK_THAT(m, Catch::Contains("ensembled_gpus{state=\"granted\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_granted{gpu=\"GPU-1\",index=\"0\",run=\"s1\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_granted{gpu=\"GPU-1\",index=\"0\",run=\"s2\"} 1\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_granted{gpu=\"GPU-2\",index=\"1\",run=\"\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_shared_bytes{gpu=\"GPU-1\"} 6442450944\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_gpu_shared_bytes{gpu=\"GPU-2\"} 0\n"));
  CHECK_THAT(m, Catch::Contains("ensembled_runs{state=\"preempting\"} 1\n"));
}

TEST_CASE("a served run's page is its status page under the queue's view, or the queue's view alone",
          "[serve][http]") {
  json run = SomeRuns()[0];
  run["state_dir"] = "/var/lib/ensembled/runs/a";
  RunSnapshot s;
  s.run_name = "a";
  s.round = 1;
  s.rounds = 3;
  s.members_total = 8;
  s.members_done = 4;
  std::string page = RenderServedRunPage(run, SnapshotToJson(s).dump());
  CHECK_THAT(page, Catch::Contains("<h1>ensembled: a</h1>"));
  CHECK_THAT(page, Catch::Contains("4/8 members done"));
  CHECK_THAT(page, Catch::Contains("<a href=\"/\">all runs</a> &middot; served: running, 2 GPUs (GPU-1, GPU-2)"));
  json queued = SomeRuns()[1];
  queued["state_dir"] = "/x/b";
  page = RenderServedRunPage(queued, "");
  CHECK_THAT(page, Catch::Contains("served: queued, asks 2 CPU workers &middot; needs 2 CPU workers, 0 free"));
  CHECK_THAT(page, Catch::Contains("Not started yet: no status.json in /x/b"));
  CHECK_THAT(RenderServedRunPage(queued, "{half a fi"), Catch::Contains("Not started yet"));
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
  CHECK_THAT(page.body, Catch::Contains("<td><a href=\"/runs/one\">one</a></td><td>finished</td>"));
  CHECK_THAT(page.body, Catch::Contains("/resources/cpu_workers: must be an integer &gt;= 1"));
  CHECK(page.body.find(">= 1") == std::string::npos);  // every reason and error escaped
  CHECK_THAT(page.body, Catch::Contains("<a href=\"/runs/one\">one</a>"));
  CHECK_THAT(page.body, Catch::Contains("<circle"));  // its one round, from its status.json
  auto one = HttpGet("127.0.0.1", port, "/runs/one");
  CHECK(one.status == 200);
  CHECK_THAT(one.body, Catch::Contains("<h1>ensembled: one</h1>"));
  CHECK_THAT(one.body, Catch::Contains("served: finished"));
  CHECK(HttpGet("127.0.0.1", port, "/runs/nobody").status == 404);
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
