// `ensembled serve` killed with SIGKILL while one run is mid-round and another waits: its runs
// die with it (PR_SET_PDEATHSIG: no run or worker left without a supervisor), and the daemon
// started again resumes the running run first (from its own journal: members done before the
// crash are not retrained, same bits as an undisturbed run) and keeps the queue's order. Also:
// a run that fails for good (exit 78) is `failed` with its reason and not restarted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

TEST_CASE("the daemon SIGKILLed mid-run leaves no process - restarted, everything finishes with the same bits",
          "[serve][integration][crash]") {
  ServeDaemonHarness d(2);
  // 15000 epochs: the run must still be going when the daemon is killed after its second member
  // (at 300 the lane kernel finished the whole run within the second of member_done batching).
  constexpr int kRounds = 2, kMembers = 8, kEpochs = 15000;
  WriteText(d.runs_dir() + "/first.json", TinyRunConfig("first", 2, kRounds, "", kMembers, kEpochs));
  d.Start();
  d.WaitForState("first", "running", 20);
  WriteText(d.runs_dir() + "/second.json", TinyRunConfig("second"));
  d.WaitForState("second", "queued", 20);
  d.WaitUntil([&] { return CountEvents(JournalOf(d.StateDir("first")), "member_done") >= 2; }, 60,
              "first mid-round");
  std::vector<pid_t> children = d.RunChildren();
  REQUIRE(children.size() == 1);
  std::string run_id = RunIdOf(d.StateDir("first"));
  REQUIRE_FALSE(run_id.empty());

  d.Stop(SIGKILL);
  // The run's supervisor and its workers follow the daemon.
  auto t0 = SteadyClock::now();
  while ((IsLive(children[0]) || !LeftoversOf(run_id).empty()) && SecondsSince(t0) < 10)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(IsLive(children[0]));
  INFO("left over: " << Joined(LeftoversOf(run_id), ", "));
  CHECK(LeftoversOf(run_id).empty());
  auto before = JournalOf(d.StateDir("first"));
  REQUIRE_FALSE(ReplayJournal(before).finished);

  d.Start();
  d.WaitUntil([&] { return d.StateOf("first") == "finished" && d.StateOf("second") == "finished"; }, 120,
              "both finished after the restart");
  // Queue order kept: first resumed before second started.
  std::vector<std::string> order;
  for (const auto& r : QueueEvents(d.QueueJournal(), "started")) order.push_back(r["run"].get<std::string>());
  CHECK(order == std::vector<std::string>{"first", "first", "second"});
  // Members done before the crash were not trained again; the bits of the run undisturbed.
  CheckSameAsRunAlone(d, "first", 2, kRounds, kMembers, kEpochs);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a run that fails for good (exit 78) is failed with its reason, never restarted - the others run",
          "[serve][integration]") {
  ServeDaemonHarness d(2);
  // Valid config, missing data: `ensembled run` exits 78 at start.
  WriteText(d.runs_dir() + "/nodata.json", R"({"run_name": "nodata", "resources": {"gpus": "none", "cpu_workers": 1},
      "data": {"source": "csv", "train_path": "/nonexistent/train.csv", "target_column": "y"},
      "members": {"defaults": {"layers": [{"units": 4}]}, "count": 1}})");
  WriteText(d.runs_dir() + "/ok.json", TinyRunConfig("ok", 1));
  d.Start();
  d.WaitUntil([&] { return d.StateOf("nodata") == "failed" && d.StateOf("ok") == "finished"; }, 90,
              "nodata failed and ok finished");
  json r = d.Run("nodata");
  CHECK_THAT(r["reason"].get<std::string>(), Catch::StartsWith("exited with 78"));
  CHECK_THAT(r["reason"].get<std::string>(), Catch::Contains("/nonexistent/train.csv"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // a restart would come after 1 s
  size_t starts = 0;
  for (const auto& e : QueueEvents(d.QueueJournal(), "started")) starts += e["run"] == "nodata" ? 1 : 0;
  CHECK(starts == 1);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a run that crash-loops is restarted with backoff until its budget is spent then failed - the others are unaffected",
          "[serve][integration][crash]") {
  ServeDaemonHarness d(3);
  // Every `ensembled run` of this daemon SIGKILLs itself after its 3rd member_done: "loops"
  // crashes again after each restart; "calm" (1 member) never gets there. member_done records
  // are journaled in batches of up to a second (round_runner.h), so loops' members are long
  // enough (10,000 epochs: the lane kernel trains a lone member fast) and many enough (120) that six starts cannot finish them.
  EnvChanges env;
  env.set = {{"ENSEMBLED_CRASH_AT", "after_member_done:3"}};
  WriteText(d.runs_dir() + "/loops.json", TinyRunConfig("loops", 2, 1, "", 120, 10000));
  WriteText(d.runs_dir() + "/calm.json", TinyRunConfig("calm", 1, 1, "", 1, 2));
  auto t0 = SteadyClock::now();
  d.Start(env);
  d.WaitForState("calm", "finished", 60);
  d.WaitUntil([&] { return d.StateOf("loops") == "queued" && d.Run("loops").value("crashes", 0) >= 1; }, 60,
              "loops waiting for its first restart");
  CHECK_THAT(d.Run("loops")["reason"].get<std::string>(),
             Catch::StartsWith("restart 1 of 5 in 1 s after: killed by signal 9"));
  d.WaitForState("loops", "failed", 100);
  double seconds = SecondsSince(t0);
  CHECK(seconds >= 1 + 2 + 4 + 8 + 16);  // the backoff between the six starts
  CHECK_THAT(d.Run("loops")["reason"].get<std::string>(), Catch::StartsWith("crashed 6 times in a row"));
  size_t starts = 0;
  for (const auto& e : QueueEvents(d.QueueJournal(), "started")) starts += e["run"] == "loops" ? 1 : 0;
  CHECK(starts == 6);
  // Each restart resumed: no member trained twice after its member_done.
  auto recs = JournalOf(d.StateDir("loops"));
  CHECK(CountEvents(recs, "member_done") >= 6 * 3);
  for (const auto& [key, n] : DoneCounts(recs)) CHECK(n == 1);
  CHECK(d.RunChildren().empty());
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
