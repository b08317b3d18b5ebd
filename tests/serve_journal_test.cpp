// Tests of orchestrator/serve_journal: what the queue journal says after a daemon's crash.
#include "orchestrator/serve/serve_journal.h"

#include <catch2/catch.hpp>

#include "common/state/journal.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

TEST_CASE("the queue journal replays submissions, starts and ends, by run name", "[serve][journal]") {
  testing::TempDir tmp;
  {
    auto j = Journal::Open(tmp / "queue.jsonl");
    REQUIRE(j.ok());
    REQUIRE((*j)->Append(SubmittedRecord("a", "/runs/a.json", 0, 1, 1000)).ok());
    REQUIRE((*j)->Append(SubmittedRecord("b", "/runs/b.json", 5, 2, 1001)).ok());
    REQUIRE((*j)->Append(StartedRecord("b", {"GPU-1"}, 0, 42)).ok());
    REQUIRE((*j)->Append(StartedRecord("a", {}, 2, 43)).ok());
    REQUIRE((*j)->Append(EndedRecord("a", "finished", "all rounds done")).ok());
    REQUIRE((*j)->Append(SubmittedRecord("c", "/runs/c.json", 0, 3, 1000)).ok());
  }
  auto records = ReadJournal(tmp / "queue.jsonl");
  REQUIRE(records.ok());
  ServeJournalState st = ReplayServeJournal(*records);
  CHECK(st.next_seq == 4);
  REQUIRE(st.runs.size() == 3);
  CHECK(st.runs["a"].ended);
  CHECK(st.runs["a"].end_state == "finished");
  CHECK(st.runs["a"].end_reason == "all rounds done");
  CHECK(st.runs["b"].started);
  CHECK_FALSE(st.runs["b"].ended);
  CHECK(st.runs["b"].priority == 5);
  CHECK(st.runs["b"].uid == 1001);
  CHECK(st.runs["b"].file == "/runs/b.json");
  CHECK_FALSE(st.runs["c"].started);
}

TEST_CASE("a run submitted again after it ended is a new run", "[serve][journal]") {
  std::vector<nlohmann::json> recs = {SubmittedRecord("a", "/r/a.json", 0, 1, 0), StartedRecord("a", {}, 1, 9),
                                      EndedRecord("a", "cancelled", "file removed"),
                                      SubmittedRecord("a", "/r/a2.json", 3, 7, 0),
                                      EndedRecord("ghost", "failed", "never submitted")};
  ServeJournalState st = ReplayServeJournal(recs);
  REQUIRE(st.runs.size() == 1);
  const JournaledRun& a = st.runs["a"];
  CHECK(a.file == "/r/a2.json");
  CHECK(a.priority == 3);
  CHECK_FALSE(a.started);
  CHECK_FALSE(a.ended);
  CHECK(st.next_seq == 8);
}

TEST_CASE("a preempted run is queued again - not among the runs that resume first - and its preemptions counted",
          "[serve][journal][preemption]") {
  std::vector<nlohmann::json> recs = {SubmittedRecord("low", "/r/low.json", 0, 1, 0), StartedRecord("low", {}, 2, 9),
                                      PreemptedRecord("low", "high", "preempted by run high"),
                                      StartedRecord("low", {}, 2, 11),
                                      PreemptedRecord("low", "higher", "preempted by run higher")};
  ServeJournalState st = ReplayServeJournal(recs);
  CHECK_FALSE(st.runs["low"].started);
  CHECK(st.runs["low"].preemptions == 2);
  recs.push_back(StartedRecord("low", {}, 2, 12));  // a daemon that dies now resumes it first
  st = ReplayServeJournal(recs);
  CHECK(st.runs["low"].started);
  CHECK(st.runs["low"].preemptions == 2);
  CHECK(recs[2]["by"] == "high");
}

}  // namespace
}  // namespace ens
