// Hostile messages: a worker gone bad sends garbage to its supervisor (fault injection
// ENSEMBLED_TEST_SEND_RAW, when the worker starts task r0-m000). The worker's channel is the
// only way in: a socket pair with no name, so no other process can send at all. Every message
// the supervisor can tell is bad is counted (status.json "bad_messages") and none is acted on;
// the run completes with the undisturbed run's bits.
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

// Members slow enough (~2-4 s each) that the run is still going while the garbage arrives.
std::string Config(const std::string& state_dir) {
  return R"({"run_name": "hostile", "state_dir": ")" + state_dir + R"(", "run_seed": 61,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 400, "pool_rows": 100, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 120, "batch_size": 16, "layers": [{"units": 32}, {"units": 16}]}, "count": 4},
    "pack_size": 1,  // one member per task
    "rounds": {"count": 1}})";
}

TEST_CASE("garbage from a worker is counted and ignored and the run's bits do not change",
          "[resilience][hostile]") {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm"));
  WriteText(tmp / "hostile.json", Config(tmp / "hostile"));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);

  const std::string me = std::to_string(::getpid());
  // Messages the supervisor can tell are bad (each must be counted) ...
  std::vector<std::pair<std::string, std::string>> detectable = {
      {"not JSON", "this is not JSON at all"},
      {"empty", ""},
      {"truncated JSON", R"({"v": 1, "type": "done", "slot": @SLOT@, "pid": @PID@, "task_id": "r0-m0)"},
      {"8192-byte blob", "{" + std::string(8191, 'A')},
      {"a JSON array", "[1, 2, 3]"},
      {"wrong version", R"({"v": 99, "type": "ready", "slot": @SLOT@, "pid": @PID@})"},
      {"a report that names another slot", R"({"v": 1, "type": "ready", "slot": 7, "pid": @PID@})"},
      {"done for a task the slot was not given",
       R"({"v": 1, "type": "done", "slot": @SLOT@, "pid": @PID@, "task_id": "r7-m999", "metrics": {}})"},
      {"failed for a task the slot was not given",
       R"({"v": 1, "type": "failed", "slot": @SLOT@, "pid": @PID@, "task_id": "r7-m998", "error": "forged", "permanent": true})"},
      {"heartbeat with a negative epoch",
       R"({"v": 1, "type": "heartbeat", "slot": @SLOT@, "pid": @PID@, "task_id": "x", "epoch": -5, "rss_kb": 1})"},
      {"unknown type", R"({"v": 1, "type": "reboot", "slot": @SLOT@, "pid": @PID@})"},
  };
  // ... and ones that look like stale reports from a previous worker (ignored, not counted).
  std::vector<std::pair<std::string, std::string>> stale = {
      {"ready with a pid that is not the worker's", R"({"v": 1, "type": "ready", "slot": @SLOT@, "pid": )" + me + "}"},
      {"done from a pid that is not the worker's, for every member",
       R"({"v": 1, "type": "done", "slot": @SLOT@, "pid": )" + me + R"(, "task_id": "r0-m000", "metrics": {}})"},
      {"failed (permanent) from a pid that is not the worker's",
       R"({"v": 1, "type": "failed", "slot": @SLOT@, "pid": )" + me +
           R"(, "task_id": "r0-m001", "error": "forged", "permanent": true})"},
  };
  json raw = json::array();
  for (const auto& [what, bytes] : detectable) raw.push_back(bytes);
  for (const auto& [what, bytes] : stale) raw.push_back(bytes);
  WriteText(tmp / "garbage.json", raw.dump());

  std::string state = tmp / "hostile";
  RunLayout layout(state);
  auto t0 = SteadyClock::now();
  pid_t sup = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "hostile.json"}, tmp / "h.out", tmp / "h.err",
                       EnvChanges{{{"ENSEMBLED_TEST_SEND_RAW", "r0-m000:" + (tmp / "garbage.json")}}, {}});
  // Watch status.json until the run ends; keep the last count.
  int bad = -1;
  std::optional<int> code;
  while (SecondsSince(t0) < 120) {
    if ((code = TryWait(sup))) break;
    json st = json::parse(ReadText(layout.StatusFile()), nullptr, false);
    if (st.is_object()) bad = st.value("bad_messages", bad);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!code) {
    ::kill(sup, SIGKILL);
    Wait(sup);
  }
  std::string err = ReadText(tmp / "h.err");
  INFO("hostile run:\n" << ReadText(tmp / "h.out") << err);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  json st = json::parse(ReadText(layout.StatusFile()), nullptr, false);  // status.json stays after the run
  if (st.is_object()) bad = std::max(bad, st.value("bad_messages", -1));
  std::printf("[hostile] a worker sent %zu detectable + %zu stale-looking messages; status.json bad_messages %d; "
              "run %.1f s (undisturbed %.1f s)\n",
              detectable.size(), stale.size(), bad, SecondsSince(t0), calm.seconds);
  std::fflush(stdout);
  CHECK(bad == static_cast<int>(detectable.size()));
  CHECK(err.find("rejected a report") != std::string::npos);

  // Nothing forged was acted on: every member done once, on its first attempt; same bits.
  auto recs = JournalOf(state);
  CHECK(ReplayJournal(recs).finished);
  CHECK(CountEvents(recs, "member_failed") == 0);
  CHECK(RetriedMembers(recs) == 0);
  CHECK(CountEvents(recs, "member_done") == kMembers);
  auto diffs = CompareRuns(tmp / "calm", state, 1, kMembers, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace
}  // namespace ens
