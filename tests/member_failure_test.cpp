// Member failures. Deterministic ones (a loss that turns non-finite): the member is marked
// failed with its reason and not retried; the round goes on when min_members members
// succeeded, else the run stops with exit 78 (not restarted by systemd). Inside a fused pack
// the failing member is dropped alone: its pack-mates finish, unretried, with the bits they
// have when no member fails. A transient one (a failed write) retries the pack. A pack whose
// worker is SIGKILLed by someone else in every attempt (the out-of-memory killer) fails for
// good: exit 78, saying so, not exit 1 and a systemd restart loop. Failures are injected with ENSEMBLED_TEST_NONFINITE and
// ENSEMBLED_TEST_FAIL_WRITE (common/base/fault_injection.h).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/base/atomic_file.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

// 4 members of one shape (pack_size 4 makes one pack of them), 2 rounds.
std::string Config(const std::string& state_dir, const std::string& pack_size, const std::string& min_members) {
  return R"({"run_name": "fail", "state_dir": ")" + state_dir + R"(", "run_seed": 31,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 100, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 8, "batch_size": 16, "layers": [{"units": 12}]}, "count": 4},
    "mutation": {"policy": "query_by_committee", "k": 10},)" +
         (min_members.empty() ? "" : R"("min_members": )" + min_members + ",") + R"(
    "pack_size": )" + pack_size + R"(, "max_task_attempts": 3,
    "rounds": {"count": 2}})";
}

EnvChanges NonFinite(const std::string& tasks) { return {{{"ENSEMBLED_TEST_NONFINITE", tasks}}, {}}; }
EnvChanges Healthy() { return {{}, {"ENSEMBLED_TEST_NONFINITE"}}; }

// Runs the config (state dir tmp/<name>) with `env`; the journal of the run comes back too.
struct CaseRun {
  TimedRun run;
  std::vector<json> recs;
};
CaseRun RunCase(const TempDir& tmp, const std::string& name, const std::string& pack_size,
                const std::string& min_members, const EnvChanges& env) {
  WriteText(tmp / (name + ".json"), Config(tmp / name, pack_size, min_members));
  CaseRun c;
  c.run = RunEnsembled(tmp / (name + ".json"), tmp.path(), env, 120);
  c.recs = JournalOf(tmp / name);
  return c;
}

std::vector<json> Events(const std::vector<json>& recs, const std::string& event, int round) {
  std::vector<json> out;
  for (const auto& r : recs)
    if (r.value("event", "") == event && r.value("round", -1) == round) out.push_back(r);
  return out;
}

// What every case checks of round 0 when `bad` failed: one member_failed, permanent, attempt
// 1, naming the cause; no member_done for it; every other member done once, at attempt 1.
void CheckRoundZero(const std::vector<json>& recs, const std::string& bad) {
  auto failed = Events(recs, "member_failed", 0);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0]["member"] == bad);
  CHECK(failed[0]["permanent"] == true);
  CHECK(failed[0]["attempt"] == 1);
  CHECK(failed[0]["error"].get<std::string>().find("non-finite") != std::string::npos);
  auto done = Events(recs, "member_done", 0);
  CHECK(done.size() == 3);
  for (const auto& d : done) {
    INFO(d.dump());
    CHECK(d["member"] != bad);
    CHECK(d["attempt"] == 1);
  }
}

TEST_CASE("a member whose loss turns non-finite fails alone and is not retried", "[failure][integration]") {
  TempDir tmp;
  auto [r, recs] = RunCase(tmp, "state", "1", "3", NonFinite("r0-m001"));
  INFO(r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  CheckRoundZero(recs, "m001");
  CHECK(r.err.find("permanent, not retried") != std::string::npos);
  RunProgress p = ReplayJournal(recs);
  REQUIRE(p.committed.size() == 2);
  // The round was committed with the three that succeeded; the next round has all four.
  json summary = json::parse(ReadText(RunLayout(tmp / "state").SummaryFile(0)));
  CHECK(summary["members"].size() == 3);
  CHECK(Events(recs, "member_done", 1).size() == 4);
}

TEST_CASE("below min_members a deterministic failure stops the run with exit 78", "[failure][integration]") {
  TempDir tmp;
  auto [r, recs] = RunCase(tmp, "state", "1", "", NonFinite("r0-m002"));  // min_members: all
  INFO(r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 78);
  CHECK(r.err.find("min_members") != std::string::npos);
  CHECK(r.err.find("member m002") != std::string::npos);
  CHECK(r.err.find("non-finite") != std::string::npos);
  CheckRoundZero(recs, "m002");
  CHECK(ReplayJournal(recs).committed.empty());
}

TEST_CASE("a packed member with a non-finite loss leaves its pack-mates' bits untouched", "[failure][pack][integration]") {
  TempDir tmp;
  auto base = RunCase(tmp, "base", "4", "3", Healthy());
  INFO(base.run.out << base.run.err);
  REQUIRE(base.run.code == 0);
  auto [r, recs] = RunCase(tmp, "state", "4", "3", NonFinite("r0-m002"));
  INFO(r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  CheckRoundZero(recs, "m002");
  RunLayout failed(tmp / "state"), healthy(tmp / "base");
  json m0 = json::parse(ReadMemberText(failed.MemberDir(0, "m000") + "/metrics.json"));
  CHECK(m0["pack_size"] == 4);  // it really trained in the pack with m002
  // Its record names its own task alone: nothing about its pack-mates is needed to retrain it.
  json rec0 = json::parse(ReadMemberText(failed.MemberDir(0, "m000") + "/member.json"));
  CHECK(rec0.contains("task"));
  CHECK_FALSE(rec0.contains("pack_members"));
  CHECK_FALSE(MemberExists(failed.MemberDir(0, "m002")));
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const char* m : {"m000", "m001", "m003"}) pairs.emplace_back(failed.MemberDir(0, m), healthy.MemberDir(0, m));
  auto diffs = CompareMemberDirs(pairs, tmp.path());
  for (size_t i = 0; i < diffs.size(); ++i) {
    INFO(pairs[i].first);
    CHECK(diffs[i] == "equal");
  }
  // verify retrains each surviving member alone (m002 takes no part) and still matches.
  auto v = RunWithEnv({BinaryPath("ensemblectl"), "verify", "--state-dir", tmp / "state", "--round", "0"},
                      tmp.path(), Healthy(), 120);
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find("3 member(s) checked, 0 mismatch(es)") != std::string::npos);
  CHECK(v.out.find("m000            0  equal (trained in a pack of 4, packs/r0-m000-a1.json)") != std::string::npos);
}

// A transient failure of one packed member (its directory write fails once) retries the whole
// pack: the mates already journaled train again unpublished (not rewritten), and their late
// reports, which may arrive after the round is complete, count nowhere.
TEST_CASE("a packed member's failed write retries its pack without rewriting the journaled mates",
          "[failure][pack][integration]") {
  TempDir tmp;
  auto base = RunCase(tmp, "base", "4", "", Healthy());
  INFO(base.run.out << base.run.err);
  REQUIRE(base.run.code == 0);
  EnvChanges fail_once{{{"ENSEMBLED_TEST_FAIL_WRITE", "r0-m000:1"}}, {"ENSEMBLED_TEST_NONFINITE"}};
  auto [r, recs] = RunCase(tmp, "state", "4", "", fail_once);
  INFO(r.out << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("injected failure") != std::string::npos);
  CHECK(Events(recs, "member_failed", 0).empty());
  auto done0 = Events(recs, "member_done", 0);
  REQUIRE(done0.size() == 4);
  for (const auto& d : done0) {
    INFO(d.dump());
    CHECK(d["attempt"] == (d["member"] == "m000" ? 2 : 1));
  }
  // Every member_done belongs to its round (a late report of round 0 would carry round 0).
  for (int round : {0, 1})
    for (const auto& d : Events(recs, "member_done", round)) {
      INFO(d.dump());
      CHECK(d["metrics"]["round"] == round);
    }
  CHECK(Events(recs, "member_done", 1).size() == 4);
  RunLayout layout(tmp / "state");
  for (const char* m : {"m001", "m002", "m003"}) {  // written once, by attempt 1
    json metrics = json::parse(ReadMemberText(layout.MemberDir(0, m) + "/metrics.json"));
    INFO(m);
    CHECK(metrics["attempt"] == 1);
  }
  auto diffs = CompareRuns(tmp / "base", tmp / "state", 2, 4, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

TEST_CASE("a pack killed by the out-of-memory killer in every attempt stops the run with 78, saying so",
          "[failure][pack]") {
  TempDir tmp;
  // Every pack of more than 2 members is SIGKILLed when it starts (a machine that fits 2).
  auto c = RunCase(tmp, "oom", "4", "", {{{"ENSEMBLED_TEST_SIGKILL_ABOVE", "2"}}, {"ENSEMBLED_TEST_NONFINITE"}});
  INFO(c.run.out << c.run.err);
  REQUIRE_FALSE(c.run.timed_out);
  CHECK(c.run.code == 78);  // RestartPreventExitStatus: systemd does not loop on it
  CHECK(c.run.err.find("out-of-memory killer") != std::string::npos);
  CHECK(c.run.err.find("pack of 4") != std::string::npos);
  CHECK(c.run.err.find("killed by signal 9") != std::string::npos);
  auto failed = Events(c.recs, "member_failed", 0);
  CHECK(failed.size() == 4);
  for (const auto& f : failed) CHECK(f.value("attempt", 0) == 3);  // max_task_attempts, then no more
  CHECK(Events(c.recs, "member_done", 0).empty());

  // A pack that fits trains: the same hook with room for 4 lets the run finish.
  auto fits = RunCase(tmp, "fits", "4", "", {{{"ENSEMBLED_TEST_SIGKILL_ABOVE", "4"}}, {"ENSEMBLED_TEST_NONFINITE"}});
  INFO(fits.run.out << fits.run.err);
  CHECK(fits.run.code == 0);
}

}  // namespace
}  // namespace ens
