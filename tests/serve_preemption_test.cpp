// `ensembled serve` with preemption on: a run of a higher priority whose ask does not fit stops
// a lower-priority run at a member boundary (SIGTERM; killed after the grace), starts within
// 1 s of that grace, and the preempted run goes back to the queue and later finishes with the
// bits of the same run undisturbed (members in flight trained again, none trained twice into
// the results). A run of the same priority is never preempted.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr double kGraceS = 1.0;
const std::string kPreemption = R"("preemption": {"enabled": true, "grace_s": 1},)";

TEST_CASE("a higher-priority run preempts a running one - it starts after the grace, the preempted one resumes "
          "with the same bits", "[serve][integration][preemption]") {
  ServeDaemonHarness d(1, "\"none\"", "", kPreemption);
  // One worker, members of a few seconds: right after a member is done the next is in flight
  // and will not finish within the grace: the run is killed at its end.
  constexpr int kRounds = 2, kMembers = 3, kEpochs = 20000;
  WriteText(d.runs_dir() + "/low.json", TinyRunConfig("low", 1, kRounds, "", kMembers, kEpochs));
  d.Start();
  d.WaitForState("low", "running", 20);
  d.WaitUntil([&] { return CountEvents(JournalOf(d.StateDir("low")), "member_done") >= 1; }, 120, "low mid-round");

  WriteText(d.tmp() / "high.json", TinyRunConfig("high", 1, 1));
  auto t0 = SteadyClock::now();
  TimedRun submit = d.Ctl({"submit", "--socket", d.socket(), "--priority", "5", d.tmp() / "high.json"});
  INFO(submit.out << submit.err);
  REQUIRE(submit.code == 0);
  bool saw_preempting = false;
  d.WaitUntil(
      [&] {
        saw_preempting = saw_preempting || d.StateOf("low") == "preempting";
        std::string high = d.StateOf("high");
        return high == "running" || high == "finished";
      },
      30, "high started");
  const double waited = SecondsSince(t0);
  INFO("high started " << waited << " s after its submission; the grace is " << kGraceS << " s");
  CHECK(waited <= kGraceS + 1.0);
  CHECK(saw_preempting);
  json low = d.Run("low");
  CHECK(low["state"] == "queued");
  CHECK(low["preemptions"] == 1);
  CHECK(low["reason"] == "preempted by run high; needs 1 CPU worker, 0 free");

  d.WaitUntil([&] { return d.StateOf("high") == "finished" && d.StateOf("low") == "finished"; }, 240,
              "both finished");
  std::vector<std::string> order;
  for (const auto& r : QueueEvents(d.QueueJournal(), "started")) order.push_back(r["run"].get<std::string>());
  CHECK(order == std::vector<std::string>{"low", "high", "low"});
  auto preempted = QueueEvents(d.QueueJournal(), "preempted");
  REQUIRE(preempted.size() == 1);
  CHECK(preempted[0]["run"] == "low");
  CHECK(preempted[0]["by"] == "high");
  // Killed after its grace when a member was still in flight, stopped gracefully when not:
  // either way the same bits below.
  CHECK_THAT(preempted[0]["reason"].get<std::string>(), Catch::StartsWith("preempted by run high"));
  // Every member of low is in its results once, with the bits of low undisturbed.
  CheckSameAsRunAlone(d, "low", 1, kRounds, kMembers, kEpochs);
  CHECK(d.Stop() == 0);
}

TEST_CASE("a run of the same priority waits - it never preempts", "[serve][integration][preemption]") {
  ServeDaemonHarness d(2, "\"none\"", "", kPreemption);
  WriteText(d.runs_dir() + "/first.json", TinyRunConfig("first", 2, 2, "", 4, 2000));
  d.Start();
  d.WaitForState("first", "running", 20);
  WriteText(d.tmp() / "same.json", TinyRunConfig("same", 2, 1));
  REQUIRE(d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "same.json"}).code == 0);
  json same = d.Run("same");
  if (d.StateOf("first") == "running") CHECK(same["reason"] == "needs 2 CPU workers, 0 free");
  d.WaitUntil([&] { return d.StateOf("same") == "finished"; }, 240, "same finished after first");
  // first ended before same started, and was never preempted. A run that crashed is started
  // again after its backoff (a second "started" with no "ended" between, its reason in the
  // daemon's log): that is the crash path's business, not preemption's, and counts once here.
  std::vector<std::string> events;
  auto recs = ReadJournal(d.QueueJournal());
  REQUIRE(recs.ok());
  for (const auto& r : *recs) {
    std::string e = r.value("event", "") + " " + r.value("run", "");
    if (r.value("event", "") != "submitted" && (events.empty() || events.back() != e)) events.push_back(e);
  }
  INFO("daemon log:\n" << d.DaemonLog());
  CHECK(events == std::vector<std::string>{"started first", "ended first", "started same", "ended same"});
  CHECK(d.Run("first")["preemptions"] == 0);
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
