// Heartbeats in every phase of a task. A pack of 4 in one worker, heartbeat_timeout_s 3:
// ENSEMBLED_TEST_SLOW_PHASE=<phase>:1000 makes each member's step of that phase (setup,
// predicting, writing) take 1 s longer, so the phase lasts 4 s, past the timeout, yet
// it moves. The worker must not be killed for it: no "silent", every member done in attempt 1,
// and the bits equal an undisturbed run's. A worker that truly hangs in the writing phase
// (ENSEMBLED_TEST_HANG=r0-m002:1:writing) must still be killed and its members retried.
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

std::string Config(const std::string& state_dir) {
  return R"({"run_name": "phases", "state_dir": ")" + state_dir + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 50, "holdout_rows": 50}},
    "members": {"defaults": {"epochs": 3, "batch_size": 16, "layers": [{"units": 8}]}, "count": 4},
    "heartbeat_timeout_s": 3,
    "pack_size": 4,
    "rounds": {"count": 1}})";
}

// Attempt of each journaled member_done, by member name.
std::map<std::string, int> DoneAttempts(const std::string& state_dir) {
  std::map<std::string, int> out;
  for (const auto& r : JournalOf(state_dir))
    if (r.value("event", "") == "member_done") out[r["member"].get<std::string>()] = r.value("attempt", 0);
  return out;
}

TEST_CASE("a phase longer than heartbeat_timeout_s that keeps moving is not killed", "[resilience][heartbeat]") {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm"));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {{}, {"ENSEMBLED_TEST_SLOW_PHASE", "ENSEMBLED_TEST_HANG"}}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);
  for (const char* phase : {"setup", "predicting", "writing"}) {
    SECTION(phase) {
      const std::string state = tmp / (std::string("slow-") + phase);
      WriteText(state + ".json", Config(state));
      auto slow = RunEnsembled(state + ".json", tmp.path(),
                               {{{"ENSEMBLED_TEST_SLOW_PHASE", std::string(phase) + ":1000"}}, {"ENSEMBLED_TEST_HANG"}}, 90);
      INFO("slow " << phase << ":\n" << slow.out << slow.err);
      REQUIRE_FALSE(slow.timed_out);
      REQUIRE(slow.code == 0);
      std::printf("[heartbeat_phases] %s: %.1f s with 4 x 1 s injected (undisturbed %.1f s)\n", phase, slow.seconds,
                  calm.seconds);
      std::fflush(stdout);
      // The phase really outlasted the timeout (4 x 1 s were injected into it), and nobody was
      // killed for it.
      CHECK(slow.seconds > 4.0);
      CHECK(slow.err.find("silent") == std::string::npos);
      auto attempts = DoneAttempts(state);
      REQUIRE(attempts.size() == kMembers);
      for (const auto& [name, attempt] : attempts) CHECK(attempt == 1);
      auto diffs = CompareRuns(tmp / "calm", state, 1, kMembers, tmp.path());
      INFO(Joined(diffs));
      CHECK(diffs.empty());
    }
  }
}

TEST_CASE("a worker that hangs while writing outputs is still killed and its pack retried", "[resilience][heartbeat]") {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm"));
  WriteText(tmp / "hang.json", Config(tmp / "hang"));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {{}, {"ENSEMBLED_TEST_SLOW_PHASE", "ENSEMBLED_TEST_HANG"}}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);
  auto hung = RunEnsembled(tmp / "hang.json", tmp.path(),
                           {{{"ENSEMBLED_TEST_HANG", "r0-m002:1:writing"}}, {"ENSEMBLED_TEST_SLOW_PHASE"}}, 90);
  INFO("hung run:\n" << hung.out << hung.err);
  REQUIRE_FALSE(hung.timed_out);
  REQUIRE(hung.code == 0);
  CHECK(hung.err.find("silent") != std::string::npos);
  CHECK(hung.err.find("SIGTERM") != std::string::npos);
  auto attempts = DoneAttempts(tmp / "hang");
  REQUIRE(attempts.size() == kMembers);
  CHECK(attempts["m002"] == 2);  // the hung attempt published nothing; the retry did
  auto diffs = CompareRuns(tmp / "calm", tmp / "hang", 1, kMembers, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace
}  // namespace ens
