// The Prometheus endpoint of a running ensembled (service.http_port): valid text exposition
// format, values that agree with the journal, loopback only; a taken port is a clear error.
#include <catch2/catch.hpp>

#include <ifaddrs.h>

#include <cmath>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "orchestrator/service/run_snapshot.h"
#include "support/env_spawn_notify.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kMembers = 4, kWorkers = 2;

std::string MetricsConfig(const std::string& state_dir, int port, const std::string& name = "metrics") {
  return R"({
    "run_name": ")" + name + R"(", "state_dir": ")" + state_dir + R"(", "run_seed": 23,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(kWorkers) + R"(, "threads_per_worker": 1},
    "data": {"source": "synthetic",
             "synthetic": {"initial_rows": 600, "pool_rows": 2000, "holdout_rows": 300}},
    "members": {"defaults": {"epochs": 30, "batch_size": 32, "layers": [{"units": 16}]},
                "count": )" + std::to_string(kMembers) + R"(},
    "mutation": {"policy": "query_by_committee", "k": 15},
    "rounds": {"count": 60}, "pack_size": 1,
    "service": {"http_port": )" + std::to_string(port) + R"(}
  })";
}

struct Sample {
  std::string name, labels;
  double value = 0;
};

struct Exposition {
  std::vector<std::string> problems;
  std::vector<Sample> samples;
  std::map<std::string, std::string> types;  // family -> type
};

// Parses and checks the text format (version 0.0.4) strictly enough to catch what breaks
// Prometheus: the sample grammar, HELP/TYPE before a family's samples, families contiguous,
// no duplicate series, counters named *_total, histograms cumulative with +Inf == _count.
Exposition ParseExposition(const std::string& text) {
  static const std::regex sample_re(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*,?)?\})? (NaN|[+-]Inf|[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)(?: -?[0-9]+)?$)");
  static const std::regex help_re(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  static const std::regex type_re(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  Exposition e;
  std::set<std::string> helped, closed, series;
  std::string current;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  if (text.empty() || text.back() != '\n') e.problems.push_back("the text does not end with a newline");
  while (std::getline(in, line)) {
    ++n;
    std::string where = "line " + std::to_string(n) + ": '" + line + "'";
    std::smatch m;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (std::regex_match(line, m, help_re)) {
        helped.insert(m[1]);
      } else if (std::regex_match(line, m, type_re)) {
        std::string fam = m[1];
        if (e.types.count(fam)) e.problems.push_back(where + ": a second TYPE for " + fam);
        if (!helped.count(fam)) e.problems.push_back(where + ": TYPE without a HELP before it");
        e.types[fam] = m[2];
        if (m[2] == "counter" && fam.size() > 6 && fam.substr(fam.size() - 6) != "_total")
          e.problems.push_back(where + ": a counter not named *_total");
        if (!current.empty() && current != fam) closed.insert(current);
        current = fam;
      } else if (line.rfind("# HELP", 0) == 0 || line.rfind("# TYPE", 0) == 0) {
        e.problems.push_back(where + ": malformed HELP/TYPE line");
      }
      continue;
    }
    if (!std::regex_match(line, m, sample_re)) {
      e.problems.push_back(where + ": not a valid sample line");
      continue;
    }
    Sample s{m[1], m[3], 0};
    std::string v = m[4];
    s.value = v == "NaN" ? NAN : v == "+Inf" ? INFINITY : v == "-Inf" ? -INFINITY : std::stod(v);
    std::string fam = s.name;
    if (!e.types.count(fam))
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        std::string sx = suffix;
        if (fam.size() > sx.size() && fam.substr(fam.size() - sx.size()) == sx &&
            e.types.count(fam.substr(0, fam.size() - sx.size()))) {
          fam = fam.substr(0, fam.size() - sx.size());
          break;
        }
      }
    if (!e.types.count(fam)) e.problems.push_back(where + ": sample before its family's TYPE line");
    if (closed.count(fam)) e.problems.push_back(where + ": family " + fam + " is not contiguous");
    if (fam != current) {
      if (!current.empty()) closed.insert(current);
      current = fam;
    }
    if (!series.insert(s.name + "{" + s.labels + "}").second) e.problems.push_back(where + ": duplicate series");
    e.samples.push_back(s);
  }
  // Histograms: cumulative buckets, +Inf bucket == _count.
  for (const auto& [fam, type] : e.types) {
    if (type != "histogram") continue;
    double prev = -1, inf = -1, count = -1;
    for (const auto& s : e.samples) {
      if (s.name == fam + "_bucket") {
        if (s.value < prev) e.problems.push_back(fam + ": buckets not cumulative at {" + s.labels + "}");
        prev = s.value;
        if (s.labels.find("le=\"+Inf\"") != std::string::npos) inf = s.value;
      }
      if (s.name == fam + "_count") count = s.value;
    }
    if (inf < 0) e.problems.push_back(fam + ": no le=\"+Inf\" bucket");
    if (inf != count) e.problems.push_back(fam + ": +Inf bucket != _count");
  }
  return e;
}

std::vector<Sample> Find(const Exposition& e, const std::string& name) {
  std::vector<Sample> out;
  for (const auto& s : e.samples)
    if (s.name == name) out.push_back(s);
  return out;
}

double One(const Exposition& e, const std::string& name) {
  auto v = Find(e, name);
  return v.size() == 1 ? v[0].value : NAN;
}

// LISTEN sockets on `port` in /proc/net/tcp{,6}: the local address field of each.
std::vector<std::string> Listeners(int port) {
  std::vector<std::string> out;
  char hexport[8];
  std::snprintf(hexport, sizeof(hexport), "%04X", port);
  for (const char* f : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream in(ReadText(f));
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string sl, local, remote, st;
      fields >> sl >> local >> remote >> st;
      auto colon = local.rfind(':');
      if (colon != std::string::npos && local.substr(colon + 1) == hexport && st == "0A")
        out.push_back(std::string(f) + " " + local.substr(0, colon));
    }
  }
  return out;
}

// This host's IPv4 addresses other than loopback.
std::vector<std::string> NonLoopbackIPv4() {
  std::vector<std::string> out;
  struct ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) != 0) return out;
  for (auto* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    if (std::string(buf).rfind("127.", 0) != 0) out.push_back(buf);
  }
  ::freeifaddrs(ifs);
  return out;
}

TEST_CASE("GET /metrics: Prometheus text format, values that match the journal, loopback only",
          "[service][metrics]") {
  TempDir tmp;
  std::string state = tmp / "state";
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  WriteText(tmp / "cfg.json", MetricsConfig(state, port));
  Daemon d(SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err"));

  // After the first committed round.
  HttpReply reply;
  Exposition e;
  bool got = WaitUntil(120, [&] {
    if (d.Exited()) return true;
    reply = HttpGet("127.0.0.1", port, "/metrics");
    if (!reply.ok || reply.status != 200) return false;
    e = ParseExposition(reply.body);
    return One(e, "ensembled_rounds_completed") >= 1;
  }, 250);
  auto recs = JournalOf(state);
  INFO("stderr:\n" << ReadText(tmp / "err") << "\n/metrics:\n" << reply.headers << "\n\n" << reply.body);
  REQUIRE(got);
  REQUIRE_FALSE(d.Exited());
  REQUIRE(reply.status == 200);

  // The format.
  INFO("problems:\n" << Joined(e.problems));
  CHECK(e.problems.empty());
  CHECK(std::regex_search(reply.headers, std::regex(R"(Content-Type: text/plain; version=0\.0\.4)", std::regex::icase)));

  // The values agree with the journal as of the snapshot.
  int rounds_completed = static_cast<int>(One(e, "ensembled_rounds_completed"));
  std::vector<json> commits;
  for (const auto& r : recs)
    if (r.value("event", "") == "round_committed") commits.push_back(r);
  REQUIRE(static_cast<int>(commits.size()) >= rounds_completed);
  const json& last = commits[static_cast<size_t>(rounds_completed) - 1];
  CHECK(One(e, "ensembled_dataset_rows") == last["train_rows"].get<double>());
  CHECK(One(e, "ensembled_dataset_generation") == last["generation"].get<double>());
  CHECK(One(e, "ensembled_members_finished_total") >= kMembers * rounds_completed);
  CHECK(One(e, "ensembled_members_failed_total") == 0);
  CHECK(One(e, "ensembled_round") >= rounds_completed - 1);
  CHECK(One(e, "ensembled_task_duration_seconds_count") >= kMembers * rounds_completed);
  auto rmse = Find(e, "ensembled_ensemble_rmse");
  REQUIRE(static_cast<int>(rmse.size()) == rounds_completed);
  for (int r = 0; r < rounds_completed; ++r) {
    CHECK(rmse[static_cast<size_t>(r)].labels.find("round=\"" + std::to_string(r) + "\"") != std::string::npos);
    double want = commits[static_cast<size_t>(r)]["summary"]["ensemble_rmse"].get<double>();
    CHECK(std::abs(rmse[static_cast<size_t>(r)].value - want) <= 1e-4 * want);
  }
  // A regression round's error is its RMSE.
  auto error = Find(e, "ensembled_ensemble_error");
  REQUIRE(error.size() == rmse.size());
  for (size_t r = 0; r < error.size(); ++r) CHECK(error[r].value == Approx(rmse[r].value).epsilon(1e-6));
  CHECK(Find(e, "ensembled_ensemble_accuracy").empty());
  // Calibration: the last committed round's, as its summary has it (four members: a spread).
  const json& summary = last["summary"];
  CHECK(One(e, "ensembled_round_coverage_1sigma") == Approx(summary["coverage_1sigma"].get<double>()).epsilon(1e-9));
  CHECK(One(e, "ensembled_round_coverage_2sigma") == Approx(summary["coverage_2sigma"].get<double>()).epsilon(1e-9));
  CHECK(One(e, "ensembled_round_holdout_nll") == Approx(summary["ensemble_gaussian_nll"].get<double>()).epsilon(1e-9));
  CHECK(Find(e, "ensembled_round_ece").empty());
  auto rss = Find(e, "ensembled_worker_rss_bytes");
  CHECK(rss.size() == kWorkers);
  for (const auto& s : rss) {
    CHECK(s.value > 1e6);
    CHECK(s.labels.find("run=\"metrics\"") != std::string::npos);
  }

  // The status page and an unknown path.
  auto page = HttpGet("127.0.0.1", port, "/");
  CHECK(page.status == 200);
  CHECK(page.body.find("<svg id=\"ensemble-error\"") != std::string::npos);
  CHECK(HttpGet("127.0.0.1", port, "/nope").status == 404);

  // Loopback only.
  auto listeners = Listeners(port);
  INFO("listeners on " << port << ":\n" << Joined(listeners));
  REQUIRE(listeners.size() == 1);
  CHECK(listeners[0] == "/proc/net/tcp 0100007F");
  for (const auto& ip : NonLoopbackIPv4()) {
    auto other = HttpGet(ip, port, "/metrics", 2000);
    INFO("via " << ip << ": " << other.error);
    CHECK_FALSE(other.ok);
  }

  CHECK(d.Stop(/*now=*/true) == 0);
}

// http_endpoint.h promises Start() "fails (naming address and port) when the port is taken",
// but cpp-httplib 0.11 (Debian 12) binds with SO_REUSEPORT by default
// (httplib::detail::default_socket_options), so a second ensembled of the same user binds the
// same port happily, and the kernel then spreads connections between the two: Prometheus
// scrapes (and the status page) alternate between two unrelated runs under one target.
// Fix: HttpEndpoint::Start() binds through BindHttpServer (http_server_limits.h): SO_REUSEADDR only.
TEST_CASE("a second daemon on a taken http_port fails, naming the address, instead of sharing the port",
          "[service][metrics]") {
  TempDir tmp;
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  WriteText(tmp / "cfg.json", MetricsConfig(tmp / "state", port, "first"));
  Daemon first(SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err"));
  REQUIRE(WaitUntil(60, [&] { return first.Exited() || HttpGet("127.0.0.1", port, "/metrics").status == 200; }, 200));
  REQUIRE_FALSE(first.Exited());

  WriteText(tmp / "cfg2.json", MetricsConfig(tmp / "state2", port, "second"));
  Daemon second(SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg2.json"}, tmp / "out2", tmp / "err2"));
  bool exited = WaitUntil(15, [&] { return second.Exited(); }, 100);
  // Whom does a scrape reach now?
  std::set<std::string> runs;
  for (int i = 0; i < 30; ++i) {
    auto r = HttpGet("127.0.0.1", port, "/metrics", 2000);
    std::smatch m;
    if (std::regex_search(r.body, m, std::regex(R"re(ensembled_round\{run="([^"]*)"\})re"))) runs.insert(m[1]);
  }
  std::string err2 = ReadText(tmp / "err2");
  INFO("second daemon stderr:\n" << err2 << "\nruns answering on the port: " << Joined(std::vector<std::string>(runs.begin(), runs.end()), ", "));
  CHECK(exited);
  if (exited) CHECK(*second.code() != 0);
  CHECK(err2.find("127.0.0.1:" + std::to_string(port)) != std::string::npos);
  CHECK(runs == std::set<std::string>{"first"});
  CHECK(Listeners(port).size() == 1);
  second.Stop(/*now=*/true);
  first.Stop(/*now=*/true);
}

// RenderPrometheus prints values with the stream's default 6 significant digits, so a counter
// past 999999 is rounded: ensembled_task_duration_seconds_sum stops moving in small steps
// after ~11.6 days of summed task time (rate() flattens, then jumps), and big counters and
// RSS bytes are off (orchestrator/service/prometheus_metrics.cpp Writer::Sample).
TEST_CASE("metric values keep their precision (large counters are not rounded to 6 digits)",
          "[service][metrics]") {
  RunSnapshot s;
  s.run_name = "p";
  s.members_finished_total = 12345678;
  s.task_seconds_sum = 1234567.891;
  s.task_seconds_count = 12345678;
  s.task_seconds_buckets.assign(s.task_seconds_bucket_bounds.size(), 0);
  Exposition e = ParseExposition(RenderPrometheus(s));
  CHECK(e.problems.empty());
  CHECK(One(e, "ensembled_members_finished_total") == 12345678);
  CHECK(std::abs(One(e, "ensembled_task_duration_seconds_sum") - 1234567.891) < 0.01);
  CHECK(One(e, "ensembled_task_duration_seconds_count") == 12345678);
}

TEST_CASE("GPU series are valid exposition with gpu and uuid labels - readings NVML did not give are left out",
          "[service][metrics][gpu]") {
  RunSnapshot s;
  s.run_name = "g";
  s.task_seconds_buckets.assign(s.task_seconds_bucket_bounds.size(), 0);
  GpuView a;
  a.index = 0;
  a.uuid = "GPU-aaaa";
  a.memory_used_mb = 1024;
  a.memory_total_mb = 2048;
  a.utilization_pct = 50;
  a.temperature_c = 60;
  a.power_w = 300.5;
  GpuView b = a;
  b.index = 1;
  b.uuid = "GPU-bbbb";
  b.power_w = -1;  // not supported on this GPU
  s.gpus = {a, b};
  WorkerView w;
  w.slot = 3;
  w.gpu = "GPU-bbbb";
  w.gpu_memory_mb = 512;
  WorkerView cpu;
  cpu.slot = 4;
  cpu.gpu = "cpu";
  s.workers = {w, cpu};
  Exposition e = ParseExposition(RenderPrometheus(s));
  INFO(Joined(e.problems, "\n"));
  CHECK(e.problems.empty());
  std::map<std::string, double> got;
  for (const auto& x : e.samples)
    if (x.name.rfind("ensembled_gpu_", 0) == 0) got[x.name + "{" + x.labels + "}"] = x.value;
  CHECK(got["ensembled_gpu_memory_used_bytes{run=\"g\",gpu=\"0\",uuid=\"GPU-aaaa\"}"] == 1024.0 * 1048576);
  CHECK(got["ensembled_gpu_utilization_ratio{run=\"g\",gpu=\"1\",uuid=\"GPU-bbbb\"}"] == 0.5);
  CHECK(got["ensembled_gpu_power_watts{run=\"g\",gpu=\"0\",uuid=\"GPU-aaaa\"}"] == 300.5);
  CHECK(got.count("ensembled_gpu_power_watts{run=\"g\",gpu=\"1\",uuid=\"GPU-bbbb\"}") == 0);
  CHECK(got["ensembled_gpu_worker_memory_bytes{run=\"g\",slot=\"3\",gpu=\"1\",uuid=\"GPU-bbbb\"}"] == 512.0 * 1048576);
  CHECK(got.size() == 10);  // 5 families x 2 GPUs - 1 missing power + 1 worker
  CHECK(e.types["ensembled_gpu_temperature_celsius"] == "gauge");
}

TEST_CASE("calibration gauges are the last committed round's - left out where its summary has none",
          "[service][metrics][calibration]") {
  RunSnapshot s;
  s.run_name = "c";
  s.task_seconds_buckets.assign(s.task_seconds_bucket_bounds.size(), 0);
  RoundView old;  // a round summarised before calibration
  old.round = 0;
  RoundView r;
  r.round = 1;
  r.figure("coverage_1sigma") = 0.25;
  r.figure("coverage_2sigma") = 0.5;
  r.figure("holdout_nll") = -0.75;  // a Gaussian NLL may be negative
  s.rounds_done = {old, r};
  Exposition e = ParseExposition(RenderPrometheus(s));
  INFO(Joined(e.problems, "\n"));
  CHECK(e.problems.empty());
  CHECK(One(e, "ensembled_round_coverage_1sigma") == 0.25);
  CHECK(One(e, "ensembled_round_coverage_2sigma") == 0.5);
  CHECK(One(e, "ensembled_round_holdout_nll") == -0.75);
  CHECK(Find(e, "ensembled_round_ece").empty());
  CHECK(e.types["ensembled_round_holdout_nll"] == "gauge");
  CHECK(Find(e, "ensembled_round_coverage_1sigma")[0].labels == "run=\"c\"");

  RoundView c;
  c.round = 2;
  c.task = TaskKind::kClassification;
  c.figure("holdout_nll") = 0.3;
  c.figure("ece") = 0.04;
  s.rounds_done = {c};
  e = ParseExposition(RenderPrometheus(s));
  CHECK(e.problems.empty());
  CHECK(One(e, "ensembled_round_ece") == 0.04);
  CHECK(One(e, "ensembled_round_holdout_nll") == 0.3);
  CHECK(Find(e, "ensembled_round_coverage_1sigma").empty());

  s.rounds_done = {r, old};  // the last round has none: nothing, not an older round's
  e = ParseExposition(RenderPrometheus(s));
  CHECK(e.problems.empty());
  CHECK(Find(e, "ensembled_round_coverage_1sigma").empty());
  CHECK(Find(e, "ensembled_round_holdout_nll").empty());
}

TEST_CASE("every figure of kRoundFigures reaches status.json, /metrics and the status page from a summary",
          "[service][metrics][calibration]") {
  // A summary with every figure of each kind of run, each a distinct value.
  for (bool classification : {false, true}) {
    nlohmann::json summary = {{classification ? "ensemble_accuracy" : "ensemble_rmse", 0.5}};
    std::vector<size_t> has;
    for (size_t i = 0; i < kRoundFigureCount; ++i) {
      const char* key = RoundFigureSummaryKey(kRoundFigures[i], classification);
      if (*key == '\0') continue;
      summary[key] = 0.125 * static_cast<double>(i + 1);
      has.push_back(i);
    }
    INFO((classification ? "classification" : "regression") << ": " << summary.dump());
    REQUIRE_FALSE(has.empty());
    RunSnapshot s;
    s.run_name = "f";
    s.task_seconds_buckets.assign(s.task_seconds_bucket_bounds.size(), 0);
    s.rounds_done = {RoundView::FromSummary(1, 10, summary, 1.0)};
    const RunSnapshot back = SnapshotFromJson(SnapshotToJson(s));  // status.json out and in
    Exposition e = ParseExposition(RenderPrometheus(back));
    INFO(Joined(e.problems, "\n"));
    CHECK(e.problems.empty());
    const std::string page = RenderStatusPage(back);
    for (size_t i = 0; i < kRoundFigureCount; ++i) {
      const RoundFigure& f = kRoundFigures[i];
      INFO(f.key);
      const bool expected = std::find(has.begin(), has.end(), i) != has.end();
      CHECK(back.rounds_done[0].figures[i].has_value() == expected);
      CHECK(Find(e, f.metric).size() == (expected ? 1u : 0u));
      if (expected) {
        CHECK(*back.rounds_done[0].figures[i] == 0.125 * static_cast<double>(i + 1));
        CHECK(One(e, f.metric) == 0.125 * static_cast<double>(i + 1));
      }
      if (*f.html_header != '\0')
        CHECK((page.find("<th>" + std::string(f.html_header) + "</th>") != std::string::npos) == expected);
    }
  }
}

TEST_CASE("per-round series cover the snapshot's window and rounds_completed counts every committed round",
          "[service][metrics][window]") {
  RunSnapshot s;
  s.run_name = "w";
  s.task_seconds_buckets.assign(s.task_seconds_bucket_bounds.size(), 0);
  std::vector<RoundCommittedRecord> committed;
  const int n = kRecentRounds + 40;
  for (int r = 0; r < n; ++r) {
    RoundCommittedRecord c;
    c.round = r;
    c.summary = {{"ensemble_rmse", 1.0 / (r + 1)}};
    c.wall_seconds = 0.5;
    committed.push_back(c);
  }
  SetCommittedRounds(&s, committed);
  Exposition e = ParseExposition(RenderPrometheus(s));
  INFO(Joined(e.problems, "\n"));
  CHECK(e.problems.empty());
  CHECK(One(e, "ensembled_rounds_completed") == n);
  for (const char* family : {"ensembled_round_duration_seconds", "ensembled_ensemble_rmse", "ensembled_ensemble_error"}) {
    auto samples = Find(e, family);
    REQUIRE(samples.size() == static_cast<size_t>(kRecentRounds));
    CHECK(samples.front().labels == "run=\"w\",round=\"" + std::to_string(n - kRecentRounds) + "\"");
    CHECK(samples.back().labels == "run=\"w\",round=\"" + std::to_string(n - 1) + "\"");
  }
}

}  // namespace
}  // namespace ens
