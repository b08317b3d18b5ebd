// A hung worker: ENSEMBLED_TEST_HANG=r0-m001:1 (inherited by the workers) makes the first
// attempt of round 0's m001 stop making progress and sending heartbeats. With
// heartbeat_timeout_s 2 the supervisor SIGTERMs it after ~2 s, retries the member (attempt 2)
// and the run completes with the undisturbed run's bits.
#include <catch2/catch.hpp>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kMembers = 4;

std::string Config(const std::string& state_dir, double heartbeat_timeout_s) {
  return R"({"run_name": "hang", "state_dir": ")" + state_dir + R"(", "run_seed": 31,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 100, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 40, "batch_size": 16, "layers": [{"units": 16}]}, "count": 4},
    "heartbeat_timeout_s": )" + std::to_string(heartbeat_timeout_s) + R"(,
    "pack_size": 1,  // one member per task
    "rounds": {"count": 1}})";
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST_CASE("a worker that hangs is stopped after heartbeat_timeout_s and its member retried", "[resilience][hang]") {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm", 60));
  WriteText(tmp / "hang.json", Config(tmp / "hang", 2));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {{}, {"ENSEMBLED_TEST_HANG"}}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);

  auto hung = RunEnsembled(tmp / "hang.json", tmp.path(), {{{"ENSEMBLED_TEST_HANG", "r0-m001:1"}}, {}}, 90);
  INFO("hung run:\n" << hung.out << hung.err);
  REQUIRE_FALSE(hung.timed_out);
  REQUIRE(hung.code == 0);
  std::printf("[hung_worker] undisturbed run %.1f s; run with r0-m001 attempt 1 hanging %.1f s\n", calm.seconds,
              hung.seconds);
  std::fflush(stdout);

  // The supervisor noticed the silence, said so and stopped the worker with SIGTERM.
  CHECK(hung.err.find("silent") != std::string::npos);
  CHECK(hung.err.find("SIGTERM") != std::string::npos);
  CHECK(hung.err.find("killed by signal 15") != std::string::npos);  // SIGTERM was enough
  CHECK(hung.err.find("ignored SIGTERM") == std::string::npos);

  auto recs = JournalOf(tmp / "hang");
  REQUIRE(ReplayJournal(recs).finished);
  int m001_attempt = 0, others_retried = 0;
  for (const auto& r : recs) {
    if (r.value("event", "") != "member_done") continue;
    if (r["member"] == "m001") m001_attempt = r.value("attempt", 0);
    else if (r.value("attempt", 1) > 1) ++others_retried;
  }
  CHECK(m001_attempt == 2);
  if (others_retried > 0) WARN(others_retried << " other member(s) were retried too (a loaded machine?)");
  if (Occurrences(hung.err, "silent") != 1)
    WARN("the supervisor reported " << Occurrences(hung.err, "silent") << " silent workers (1 expected)");

  // Timing: the hang cost about heartbeat_timeout_s, not the whole run.
  CHECK(hung.seconds < calm.seconds + 30);

  // The retried member's bits equal the undisturbed run's (and so do the others').
  auto diffs = CompareRuns(tmp / "calm", tmp / "hang", 1, kMembers, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
  json m = json::parse(ReadText(RunLayout(tmp / "hang").MemberDir(0, "m001") + "/metrics.json"));
  CHECK(m["attempt"] == 2);
}

}  // namespace
}  // namespace ens
