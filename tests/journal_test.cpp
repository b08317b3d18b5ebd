// Tests of common/journal: durable append and reopen, the torn-tail rule, corruption with a
// line number, and ReplayJournal's view of where a run stands.
#include "common/state/journal.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;

using ens::testing::TempDir;  // tests/support/process_harness.h

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spew(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

std::unique_ptr<Journal> MustOpen(const std::string& path) {
  auto j = Journal::Open(path);
  INFO(j.status().ToString());
  REQUIRE(j.ok());
  return std::move(j.value());
}

std::vector<std::string> Events(const std::vector<json>& records) {
  std::vector<std::string> out;
  for (const json& r : records) out.push_back(r.value("event", "?"));
  return out;
}

TEST_CASE("Appended records read back after reopen", "[journal]") {
  TempDir dir;
  const std::string path = dir.File("journal.jsonl");
  const int64_t before = static_cast<int64_t>(std::time(nullptr));
  {
    auto j = MustOpen(path);
    CHECK(j->records().empty());
    REQUIRE(j->Append({{"event", "run_started"}, {"train_rows", 100}}).ok());
    REQUIRE(j->Append({{"event", "member_done"}, {"round", 0}, {"member", "m000"}}).ok());
    REQUIRE(j->Append({{"event", "round_committed"}, {"round", 0}, {"generation", 1}}).ok());
    CHECK(j->records().empty());  // what Open read: appended records are on disk, not kept
  }
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // One JSON object per line.
  std::string text = Slurp(path);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
  CHECK(text.back() == '\n');

  auto j = MustOpen(path);
  CHECK(j->torn_lines_dropped() == 0);
  REQUIRE(j->records().size() == 3);
  CHECK(Events(j->records()) ==
        std::vector<std::string>{"run_started", "member_done", "round_committed"});
  CHECK(j->records()[1]["member"] == "m000");
  CHECK(j->records()[0]["train_rows"] == 100);
  CHECK(j->records()[2]["time"].get<int64_t>() >= before);
  // Appending after a reopen continues the file.
  REQUIRE(j->Append({{"event", "run_finished"}, {"reason", "rounds"}}).ok());
  auto read = ReadJournal(path);
  REQUIRE(read.ok());
  CHECK(read->size() == 4);
  CHECK(read->back()["reason"] == "rounds");
}

TEST_CASE("AppendBatch writes every record as one line each, durable together", "[journal]") {
  TempDir dir;
  const std::string path = dir.File("journal.jsonl");
  {
    auto j = MustOpen(path);
    REQUIRE(j->Append({{"event", "run_started"}, {"train_rows", 10}}).ok());
    std::vector<json> batch;
    for (int i = 0; i < 3; ++i) batch.push_back({{"event", "member_done"}, {"round", 0}, {"member", "m00" + std::to_string(i)}});
    REQUIRE(j->AppendBatch(batch).ok());
    REQUIRE(j->AppendBatch({}).ok());  // nothing to write is fine
    CHECK(j->records().empty());
  }
  std::string text = Slurp(path);
  CHECK(std::count(text.begin(), text.end(), '\n') == 4);
  auto j = MustOpen(path);
  CHECK(Events(j->records()) == std::vector<std::string>{"run_started", "member_done", "member_done", "member_done"});
  CHECK(j->records()[3]["member"] == "m002");
  CHECK(j->records()[3].contains("time"));
  CHECK(ReplayJournal(j->records()).done.size() == 3);
}

TEST_CASE("A torn last line is dropped and truncated away on Open", "[journal]") {
  TempDir dir;
  const std::string path = dir.File("journal.jsonl");
  const std::string good =
      "{\"event\":\"run_started\",\"train_rows\":5}\n"
      "{\"event\":\"member_done\",\"round\":0,\"member\":\"a\"}\n";
  std::string torn;
  SECTION("half a JSON object") { torn = "{\"event\":\"member_do"; }
  SECTION("a whole object whose newline never made it") {
    torn = "{\"event\":\"member_done\",\"round\":0,\"member\":\"b\"}";
  }
  Spew(path, good + torn);

  // ReadJournal drops it too, but leaves the file alone.
  auto read = ReadJournal(path);
  REQUIRE(read.ok());
  CHECK(read->size() == 2);
  CHECK(Slurp(path) == good + torn);

  {
    auto j = MustOpen(path);
    CHECK(j->torn_lines_dropped() == 1);
    CHECK(j->records().size() == 2);
    CHECK(Slurp(path) == good);
    REQUIRE(j->Append({{"event", "member_done"}, {"round", 0}, {"member", "c"}}).ok());
  }
  auto j = MustOpen(path);
  CHECK(j->torn_lines_dropped() == 0);
  REQUIRE(j->records().size() == 3);
  CHECK(j->records()[2]["member"] == "c");
}

TEST_CASE("A bad line before the last is Corruption naming its line number", "[journal]") {
  TempDir dir;
  const std::string path = dir.File("journal.jsonl");
  std::string bad;
  SECTION("not JSON") { bad = "this is not json"; }
  SECTION("JSON without an event") { bad = "{\"round\":1}"; }
  SECTION("an event that is not a string") { bad = "{\"event\":7}"; }
  SECTION("an empty line") { bad = ""; }
  const std::string text = "{\"event\":\"run_started\"}\n"
                           "{\"event\":\"member_done\",\"round\":0,\"member\":\"a\"}\n" +
                           bad + "\n{\"event\":\"run_finished\"}\n";
  Spew(path, text);

  auto j = Journal::Open(path);
  REQUIRE_FALSE(j.ok());
  INFO(j.status().ToString());
  CHECK(j.status().code() == Status::Code::kCorruption);
  CHECK_THAT(j.status().message(), Catch::Contains(path + ":3"));
  CHECK(Slurp(path) == text);  // never "repaired" by guessing

  auto read = ReadJournal(path);
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(read.status().message(), Catch::Contains(path + ":3"));
}

TEST_CASE("ReadJournal of a missing file is an error naming it", "[journal]") {
  TempDir dir;
  const std::string path = dir.File("nope.jsonl");
  auto read = ReadJournal(path);
  REQUIRE_FALSE(read.ok());
  CHECK_THAT(read.status().message(), Catch::Contains(path));
}

json Rec(const std::string& event, json fields = json::object()) {
  fields["event"] = event;
  return fields;
}

TEST_CASE("ReplayJournal follows rounds, generations and pool use", "[journal]") {
  std::vector<json> records = {
      Rec("run_started", {{"train_rows", 100}, {"features", 10}}),
      Rec("member_done", {{"round", 0}, {"member", "m000"}}),
      Rec("member_failed", {{"round", 0}, {"member", "m001"}, {"error", "oom"}}),
      Rec("member_done", {{"round", 0}, {"member", "m001"}}),
      Rec("round_committed",
          {{"round", 0}, {"generation", 1}, {"train_rows", 110}, {"pool_used", {3, 7}}}),
  };
  RunProgress p = ReplayJournal(records);
  CHECK(p.started);
  CHECK_FALSE(p.finished);
  CHECK(p.next_round == 1);
  CHECK(p.generation == 1);
  CHECK(p.train_rows == 110);
  CHECK(p.pool_used == std::vector<uint64_t>{3, 7});
  CHECK(p.done.empty());
  CHECK(p.failed.empty());
  CHECK(p.committed.size() == 1);

  records.push_back(Rec("member_done", {{"round", 1}, {"member", "m000"}, {"attempt", 1}}));
  records.push_back(Rec("member_done", {{"round", 0}, {"member", "m007"}}));  // older round
  records.push_back(Rec("member_failed", {{"round", 1}, {"member", "m001"}, {"attempt", 1}}));
  records.push_back(Rec("member_failed", {{"round", 1}, {"member", "m002"}, {"attempt", 1}}));
  records.push_back(Rec("member_done", {{"round", 1}, {"member", "m002"}, {"attempt", 2}}));
  p = ReplayJournal(records);
  CHECK(p.next_round == 1);
  REQUIRE(p.done.size() == 2);
  CHECK(p.done.count("m000") == 1);
  CHECK(p.done.count("m002") == 1);
  CHECK(p.done.count("m007") == 0);
  CHECK(p.done["m002"].attempt == 2);
  REQUIRE(p.failed.size() == 1);  // m002's failure was superseded by its success
  CHECK(p.failed.count("m001") == 1);

  records.push_back(Rec("round_committed", {{"round", 0}, {"generation", 9}}));  // stale commit
  records.push_back(Rec("round_committed",
                        {{"round", 1}, {"generation", 2}, {"train_rows", 120}, {"pool_used", {1}}}));
  records.push_back(Rec("run_finished", {{"rounds", 2}, {"reason", "rounds"}}));
  p = ReplayJournal(records);
  CHECK(p.next_round == 2);
  CHECK(p.generation == 2);
  CHECK(p.train_rows == 120);
  CHECK(p.pool_used == std::vector<uint64_t>{3, 7, 1});
  CHECK(p.committed.size() == 2);
  CHECK(p.done.empty());
  CHECK(p.failed.empty());
  CHECK(p.finished);
  CHECK(p.finish_reason == "rounds");
}

TEST_CASE("ReplayJournal of nothing is a run not started", "[journal]") {
  RunProgress p = ReplayJournal({});
  CHECK_FALSE(p.started);
  CHECK(p.next_round == 0);
  CHECK(p.generation == 0);
  CHECK(p.train_rows == 0);
  // run_started alone sets the initial train rows, round 0, generation 0.
  p = ReplayJournal({Rec("run_started", {{"train_rows", 42}})});
  CHECK(p.started);
  CHECK(p.next_round == 0);
  CHECK(p.train_rows == 42);
}

TEST_CASE("journal records: each type's line names its event and carries its fields", "[journal]") {
  RoundCommittedRecord c{3, 90, 4, 120, 5, {7, 2}, "/d/excluded-g0004.u64", {{"ensemble_rmse", 0.5}}, 1.25, false};
  json line = ToRecord(c);
  CHECK(line["event"] == "round_committed");
  CHECK(line["trained_rows"] == 90);
  CHECK(line["train_rows"] == 120);
  CHECK(line["pool_used"] == json::array({7, 2}));
  CHECK_FALSE(line.contains("mutation_skipped"));  // written only when true, as journals before it
  c.mutation_skipped = true;
  CHECK(ToRecord(c)["mutation_skipped"] == true);
  RoundCommittedRecord back = RoundCommittedFrom(ToRecord(c));
  CHECK(back.round == 3);
  CHECK(back.generation == 4);
  CHECK(back.dropped_rows == 5);
  CHECK(back.pool_used == std::vector<uint64_t>{7, 2});
  CHECK(back.excluded_file == "/d/excluded-g0004.u64");
  CHECK(back.summary["ensemble_rmse"] == 0.5);
  CHECK(back.wall_seconds == 1.25);
  CHECK(back.mutation_skipped);

  MutationAppliedRecord m = MutationAppliedFrom(ToRecord(MutationAppliedRecord{2, 3, 130, 0, {9}, "", 10, 0}));
  CHECK(m.round == 2);
  CHECK(m.train_rows == 130);
  CHECK(m.pool_used == std::vector<uint64_t>{9});
  CHECK(m.added == 10);

  ConfigChangedRecord k = ConfigChangedFrom(ToRecord(ConfigChangedRecord{2, 5, "abc", {"rounds.count: 3 -> 4"}}));
  CHECK(k.epoch == 2);
  CHECK(k.from_round == 5);
  CHECK(k.changes == std::vector<std::string>{"rounds.count: 3 -> 4"});

  CHECK(IsRecord<MemberDoneRecord>(ToRecord(MemberDoneRecord{0, "m1", 1, 1, 0, 42, {{"seconds", 1.0}}})));
  // The records RunProgress keeps read back as written, with the time Append gave them.
  const MemberDoneRecord done{2, "m1", 1, 3, 4, 42, {{"seconds", 1.0}}, 1700000000};
  CHECK(MemberDoneFrom(ToRecord(done)) == done);
  const MemberFailedRecord failed{2, "m7", 7, 2, "boom", true, 1700000001};
  CHECK(MemberFailedFrom(ToRecord(failed)) == failed);
  c.time = 1700000002;
  CHECK(RoundCommittedFrom(ToRecord(c)) == c);
  CHECK_FALSE(ToRecord(MemberDoneRecord{}).contains("time"));  // not written yet: Append adds it
  CHECK_FALSE(IsRecord<MemberDoneRecord>(ToRecord(MemberFailedRecord{0, "m1", 1, 2, "boom", true})));
  CHECK(ToRecord(MemberFailedRecord{0, "m1", 1, 2, "boom", true})["permanent"] == true);
  CHECK(ToRecord(RunFinishedRecord{4, "all rounds done"})["rounds"] == 4);
  CHECK(ToRecord(RunExtendedRecord{4, 6})["to_rounds"] == 6);
  CHECK(ToRecord(RunStartedRecord{"fp", 9, 100, 20, 30})["pool_rows"] == 30);
}

TEST_CASE("journal records: a line of an earlier version reads with each missing key at its default", "[journal]") {
  RoundCommittedRecord r = RoundCommittedFrom(Rec("round_committed", {{"round", 1}, {"generation", 2}}));
  CHECK(r.round == 1);
  CHECK(r.generation == 2);
  CHECK(r.pool_used.empty());
  CHECK(r.excluded_file.empty());
  CHECK_FALSE(r.mutation_skipped);
  MemberDoneRecord d = MemberDoneFrom(Rec("member_done", {{"round", 1}, {"member", "m3"}, {"attempt", "two"}}));
  CHECK(d.member == "m3");
  CHECK(d.attempt == 0);  // a key of another type reads as its default, not an exception
  CHECK(d.metrics == json::object());
  CHECK(MemberFailedFrom(Rec("member_failed", {{"member", "m4"}})).error.empty());
  // A typed record appended and replayed is what the json one was.
  TempDir dir;
  auto j = MustOpen(dir.path() + "/journal.jsonl");
  REQUIRE(j->Append(RunStartedRecord{"fp", 3, 50, 10, 10}).ok());
  REQUIRE(j->Append(RoundCommittedRecord{0, 50, 1, 60, 0, {4}, "", json::object(), 0.5, false}).ok());
  RunProgress p = ReplayJournal(MustOpen(dir.path() + "/journal.jsonl")->records());
  CHECK(p.next_round == 1);
  CHECK(p.train_rows == 60);
  CHECK(p.pool_used == std::vector<uint64_t>{4});
}

// A journal is the user's file: a line whose fields have other types (hand-edited, or written
// by another program) replays with those fields at their defaults, never an exception that
// would end the supervisor, `ensemblectl status` or the serve daemon.
TEST_CASE("journal records: a field of another type in any record reads as its default, not an exception",
          "[journal]") {
  const json odd[] = {json(7), json("x"), json(true), json::array({1}), json::object(), json(-1.5), json()};
  const char* keys[] = {"round", "member", "index", "attempt", "time", "slot", "pid", "metrics", "error",
                        "permanent", "generation", "train_rows", "dropped_rows", "pool_used", "excluded_file",
                        "trained_rows", "summary", "wall_seconds", "mutation_skipped", "added", "dropped",
                        "epoch", "from_round", "fingerprint", "reason", "files", "changes"};
  const char* events[] = {"run_started", "member_done", "member_failed", "round_committed", "mutation_applied",
                          "config_changed", "run_finished", "run_extended", "round_pruned"};
  for (const json& value : odd)
    for (const char* key : keys) {
      INFO(key << " = " << value.dump());
      std::vector<json> records;
      for (const char* event : events) {
        json r = Rec(event, {{"round", 0}, {"member", "m0"}});
        r[key] = value;
        records.push_back(r);
      }
      RunProgress p;
      REQUIRE_NOTHROW(p = ReplayJournal(records));
      REQUIRE_NOTHROW(MemberDoneFrom(records[1]));
      REQUIRE_NOTHROW(MemberFailedFrom(records[2]));
      REQUIRE_NOTHROW(RoundCommittedFrom(records[3]));
      REQUIRE_NOTHROW(MutationAppliedFrom(records[4]));
      REQUIRE_NOTHROW(ConfigChangedFrom(records[5]));
      RoundPrunedRecord pruned;
      REQUIRE_NOTHROW(RoundPrunedFrom(records[8], &pruned));
      const MemberDoneRecord d = MemberDoneFrom(records[1]);
      CHECK(d.metrics.is_object());
      if (std::string(key) == "member" && !value.is_string()) CHECK(d.member.empty());
      if (std::string(key) == "round" && !value.is_number()) CHECK(d.round == -1);
      CHECK(RoundCommittedFrom(records[3]).summary.is_object());
    }
  // Numbers outside a field's range read as its default too (a double too large for an int is
  // undefined behaviour to convert; a negative count would wrap); whole numbers written as
  // doubles read as the number.
  const MemberDoneRecord big = MemberDoneFrom(Rec("member_done", {{"round", 1e300}, {"index", -1e300}, {"attempt", 3.0},
                                                                   {"slot", 4294967296LL}, {"time", 1.5e19}}));
  CHECK(big.round == -1);
  CHECK(big.index == 0);
  CHECK(big.attempt == 3);
  CHECK(big.slot == 0);
  CHECK(big.time == 0);
  const RoundCommittedRecord neg = RoundCommittedFrom(Rec("round_committed", {{"round", 2}, {"generation", -5},
                                                                             {"train_rows", 18446744073709551615ULL}}));
  CHECK(neg.round == 2);
  CHECK(neg.generation == 0);
  CHECK(neg.train_rows == 18446744073709551615ULL);
}

// Every field of two progresses, one CHECK each (so a failure names the field).
void CheckSameProgress(const RunProgress& got, const RunProgress& want) {
  CHECK(got.started == want.started);
  CHECK(got.finished == want.finished);
  CHECK(got.finish_reason == want.finish_reason);
  CHECK(got.next_round == want.next_round);
  CHECK(got.generation == want.generation);
  CHECK(got.train_rows == want.train_rows);
  CHECK(got.dropped_rows == want.dropped_rows);
  CHECK(got.pool_used == want.pool_used);
  CHECK(got.done == want.done);
  CHECK(got.failed == want.failed);
  CHECK(got.committed == want.committed);
  CHECK(got.config_epoch == want.config_epoch);
}

// A journal of every kind of record, in the orders a run writes them: failures superseded,
// stale records of an older round, a finished run extended and its skipped mutation applied,
// a round_committed of an earlier version (no generation or row keys), config epochs.
std::vector<json> VariedJournal() {
  return {
      Rec("run_started", {{"train_rows", 100}, {"features", 3}}),
      Rec("config_changed", {{"epoch", 1}, {"from_round", 0}, {"fingerprint", "a"}}),
      Rec("member_done", {{"round", 0}, {"member", "m0"}}),
      Rec("member_failed", {{"round", 0}, {"member", "m1"}, {"error", "oom"}}),
      Rec("member_done", {{"round", 0}, {"member", "m1"}, {"attempt", 2}}),
      Rec("round_committed", {{"round", 0}, {"generation", 1}, {"train_rows", 102}, {"pool_used", {5, 6}},
                              {"summary", {{"ensemble_rmse", 0.5}}}, {"wall_seconds", 1.5}}),
      Rec("member_done", {{"round", 1}, {"member", "m0"}}),
      Rec("member_done", {{"round", 0}, {"member", "m9"}}),  // an older round's: ignored
      Rec("member_failed", {{"round", 1}, {"member", "m1"}, {"permanent", true}}),
      Rec("round_committed", {{"round", 1}, {"generation", 2}, {"train_rows", 104}, {"dropped_rows", 1},
                              {"pool_used", {7, 8}}, {"excluded_file", "x2"}, {"mutation_skipped", true}}),
      Rec("run_finished", {{"rounds", 2}, {"reason", "all rounds done"}}),
      Rec("run_extended", {{"from_rounds", 2}, {"to_rounds", 4}}),
      Rec("mutation_applied", {{"round", 1}, {"generation", 3}, {"train_rows", 106}, {"dropped_rows", 1},
                               {"pool_used", {9, 10}}, {"excluded_file", "x3"}, {"added", 2}}),
      Rec("round_committed", {{"round", 0}, {"generation", 9}}),  // stale: ignored
      Rec("member_done", {{"round", 2}, {"member", "m0"}}),
      Rec("round_committed", {{"round", 2}}),  // an earlier version's: the generation after
      Rec("config_changed", {{"epoch", 2}, {"from_round", 3}, {"fingerprint", "b"}}),
      Rec("member_failed", {{"round", 3}, {"member", "m0"}}),
      Rec("run_finished", {{"rounds", 3}, {"reason", "stop_below_error reached"}}),
  };
}

TEST_CASE("RunProgress::Apply of each record appended equals a replay of the whole journal, across reopens",
          "[journal]") {
  TempDir dir;
  const std::string path = dir.path() + "/journal.jsonl";
  const std::vector<json> records = VariedJournal();
  auto j = MustOpen(path);
  RunProgress p = ReplayJournal(j->records());
  for (size_t i = 0; i < records.size(); ++i) {
    INFO("after record " << i << ": " << records[i].dump());
    if (i == 7 || i == 12) {  // a restart: the progress is the replay of what Open reads
      j.reset();
      j = MustOpen(path);
      REQUIRE(j->records().size() == i);
      p = ReplayJournal(j->records());
    }
    json written;
    REQUIRE(j->Append(records[i], &written).ok());
    CHECK(written.contains("time"));
    p.Apply(written);
    auto all = ReadJournal(path);
    REQUIRE(all.ok());
    CheckSameProgress(p, ReplayJournal(*all));
  }
  // Not two equal wrong answers: where the varied journal leaves a run.
  CHECK(p.started);
  CHECK(p.finished);
  CHECK(p.finish_reason == "stop_below_error reached");
  CHECK(p.next_round == 3);
  CHECK(p.generation == 4);  // round 2's commit had no generation key: the one after 3
  CHECK(p.train_rows == 106);
  CHECK(p.dropped_rows == 1);
  CHECK(p.pool_used == std::vector<uint64_t>{5, 6, 7, 8, 9, 10});
  REQUIRE(p.committed.size() == 3);
  CHECK(p.committed[1].excluded_file == "x3");
  CHECK_FALSE(p.committed[1].mutation_skipped);
  CHECK(p.done.empty());
  CHECK(p.failed.count("m0") == 1);
  CHECK(p.config_epoch == 2);
}

TEST_CASE("Journal keeps the records Open read, not those appended after it", "[journal]") {
  TempDir dir;
  const std::string path = dir.path() + "/journal.jsonl";
  Spew(path, "{\"event\":\"run_started\",\"train_rows\":5}\n");
  auto j = MustOpen(path);
  for (int i = 0; i < 3; ++i) REQUIRE(j->Append(MemberDoneRecord{0, "m" + std::to_string(i), i, 1, 0, 1, {}}).ok());
  REQUIRE(j->AppendBatch({ToRecord(MemberDoneRecord{0, "m3", 3, 1, 0, 1, {}})}).ok());
  CHECK(Events(j->records()) == std::vector<std::string>{"run_started"});
  auto all = ReadJournal(path);
  REQUIRE(all.ok());
  CHECK(all->size() == 5);
  CHECK(ReplayJournal(*all).done.size() == 4);
}

}  // namespace
}  // namespace ens
