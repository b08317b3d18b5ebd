// Supervisor crashes: ensembled is SIGKILLed at each crash point it has (common/base/fault_injection.h,
// ENSEMBLED_CRASH_AT), then run again. The resumed run ends in exactly the state an undisturbed
// run ends in: same bits in every checkpoint, same commits, no member retrained after its
// member_done, nothing of the run left behind (LeftoversOf).
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/state/dataset_segment.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kRounds = 2;
constexpr int kMembers = 4;
constexpr int kWorkers = 2;

// pack_size 1: one member per task, so the two workers train members side by side. Short
// (even) and long (odd) members: at the 3rd member_done (m001, long) the other worker is in the
// middle of training m003, whatever the machine's speed.
std::string Config(const std::string& state_dir, const std::string& rounds_extra = "",
                   const std::string& pack_size = "1", const std::string& top_extra = "") {
  return R"({"run_name": "crash", "state_dir": ")" + state_dir + R"(", "run_seed": 23,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 150, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 10, "batch_size": 16, "layers": [{"units": 16}]},
                "count": 4,
                "variants": [{"split": "random"},
                             {"split": "bootstrap", "epochs": 70, "layers": [{"units": 12}, {"units": 8}]}]},
    "mutation": {"policy": "query_by_committee", "k": 10},)" + top_extra + R"(
    "pack_size": )" + pack_size + R"(,
    "rounds": {"count": 2)" + rounds_extra + R"(}})";
}

EnvChanges CrashAt(const std::string& point) { return {{{"ENSEMBLED_CRASH_AT", point}}, {}}; }
EnvChanges NoCrash() { return {{}, {"ENSEMBLED_CRASH_AT"}}; }

SegmentHeader TrainHeader(const std::string& state) {
  SegmentHeader h{};
  std::ifstream in(RunLayout::TrainSegment(RunLayout(state).DataDir()), std::ios::binary);
  in.read(reinterpret_cast<char*>(&h), sizeof(h));
  return h;
}

std::string LineWith(const std::string& text, const std::string& needle) {
  size_t at = text.find(needle);
  if (at == std::string::npos) return "";
  size_t bol = text.rfind('\n', at);
  size_t eol = text.find('\n', at);
  bol = bol == std::string::npos ? 0 : bol + 1;
  return text.substr(bol, eol == std::string::npos ? std::string::npos : eol - bol);
}

// What the crashed run left: which members were journaled done, and their checkpoints' mtimes.
struct CrashSnapshot {
  std::vector<json> recs;
  std::map<std::string, int64_t> done_mtimes;  // member dir -> checkpoint mtime (ns)
};

CrashSnapshot Snapshot(const std::string& state) {
  CrashSnapshot s;
  s.recs = JournalOf(state);
  RunLayout layout(state);
  for (const auto& r : s.recs)
    if (r.value("event", "") == "member_done") {
      std::string dir = layout.MemberDir(r["round"].get<int>(), r["member"].get<std::string>());
      s.done_mtimes[dir] = MtimeNs(dir + "/weights.bin");
    }
  return s;
}

// The checks every crash point must pass after the resumed run. Returns nothing; CHECKs.
void CheckResumedEqualsBaseline(const std::string& base, const std::string& state, const CrashSnapshot& before,
                                const std::string& scratch) {
  auto recs = JournalOf(state);
  RunProgress p = ReplayJournal(recs);
  CHECK(p.finished);
  // Every checkpoint bitwise equal to the undisturbed run's.
  auto diffs = CompareRuns(base, state, kRounds, kMembers, scratch, CompareMode::kBytes);
  INFO(Joined(diffs));
  CHECK(diffs.empty());
  // Same commits.
  auto b = CommitFacts(JournalOf(base)), c = CommitFacts(recs);
  REQUIRE(c.size() == b.size());
  for (size_t i = 0; i < b.size(); ++i) {
    INFO("round " << i);
    CHECK(c[i]["train_rows"] == b[i]["train_rows"]);
    CHECK(c[i]["pool_used"] == b[i]["pool_used"]);
    CHECK(c[i]["generation"] == b[i]["generation"]);
  }
  // One member_done per (round, member): nothing retrained after its member_done ...
  auto counts = DoneCounts(recs);
  CHECK(counts.size() == static_cast<size_t>(kRounds * kMembers));
  for (const auto& [key, n] : counts) {
    INFO("round " << key.first << " member " << key.second << " has " << n << " member_done records");
    CHECK(n == 1);
  }
  // ... and its files were not rewritten either.
  for (const auto& [dir, mtime] : before.done_mtimes) {
    INFO(dir << " was done before the crash");
    CHECK(MtimeNs(dir + "/weights.bin") == mtime);
  }
  // Nothing of the run left: no named IPC object, no worker.
  std::string run_id = RunIdOf(state);
  REQUIRE_FALSE(run_id.empty());
  auto left = LeftoversOf(run_id);
  INFO("left over: " << Joined(left, ", "));
  CHECK(left.empty());
}

TEST_CASE("ensembled killed at each crash point resumes to the undisturbed result", "[resilience][crash]") {
  TempDir tmp;
  WriteText(tmp / "base.json", Config(tmp / "base"));
  auto base = RunEnsembled(tmp / "base.json", tmp.path(), NoCrash(), 90);
  INFO(base.out << base.err);
  REQUIRE(base.code == 0);
  std::printf("[crash] undisturbed run: %.1f s\n", base.seconds);

  struct Point {
    const char* spec;
    const char* dir;
  };
  for (Point pt : {Point{"after_dispatch", "dispatch"}, Point{"after_member_done:3", "member_done3"},
                   Point{"after_mutation_append", "mutation_append"}, Point{"after_summary", "summary"},
                   Point{"after_round_commit", "round_commit"}}) {
    INFO("ENSEMBLED_CRASH_AT=" << pt.spec);
    std::string state = tmp / pt.dir;
    std::string cfg = tmp / (std::string(pt.dir) + ".json");
    WriteText(cfg, Config(state));

    auto crashed = RunEnsembled(cfg, tmp.path(), CrashAt(pt.spec), 90);
    INFO("crashed run:\n" << crashed.out << crashed.err);
    REQUIRE_FALSE(crashed.timed_out);
    CHECK(crashed.code == 128 + SIGKILL);
    CrashSnapshot snap = Snapshot(state);
    RunProgress at_crash = ReplayJournal(snap.recs);
    std::string run_id = RunIdOf(state);
    auto leftovers_after_crash = LeftoversOf(run_id);
    uint64_t rows_at_crash = TrainHeader(state).rows;

    // The crash happened where it was meant to.
    std::string point(pt.spec);
    CHECK_FALSE(at_crash.finished);
    if (point == "after_dispatch") {
      CHECK(CountEvents(snap.recs, "member_done") == 0);
    } else if (point == "after_member_done:3") {
      // member_done records are journaled in batches (one fsync for the reports that came in
      // together), so the batch holding the third may hold the fourth too.
      CHECK(CountEvents(snap.recs, "member_done") >= 3);
      CHECK(at_crash.committed.empty());
    } else if (point == "after_mutation_append" || point == "after_summary") {
      CHECK(at_crash.committed.empty());
      CHECK(at_crash.done.size() == static_cast<size_t>(kMembers));
      CHECK(TrainHeader(state).rows == 210);  // appended, never committed
      CHECK(TrainHeader(state).generation == 1);
      CHECK(std::filesystem::exists(RunLayout(state).SummaryFile(0)) == (point == "after_summary"));
    } else if (point == "after_round_commit") {
      CHECK(at_crash.committed.size() == 1);
      CHECK(at_crash.next_round == 1);
    }

    auto resumed = RunEnsembled(cfg, tmp.path(), NoCrash(), 90);
    INFO("resumed run:\n" << resumed.out << resumed.err);
    REQUIRE_FALSE(resumed.timed_out);
    REQUIRE(resumed.code == 0);
    if (point == "after_mutation_append" || point == "after_summary")
      CHECK(resumed.err.find("rolling") != std::string::npos);  // the uncommitted append was rolled back
    CheckResumedEqualsBaseline(tmp / "base", state, snap, tmp.path());

    std::string resume_line = LineWith(resumed.err, "resuming");
    std::printf("[crash] %-22s crashed after %.1f s with exit %d: %d member_done, %zu round(s) committed, "
                "train.bin %llu rows; %zu leftover(s) of the run right after the crash\n"
                "        resumed in %.1f s: %s\n",
                pt.spec, crashed.seconds, crashed.code, CountEvents(snap.recs, "member_done"), at_crash.committed.size(),
                static_cast<unsigned long long>(rows_at_crash),
                leftovers_after_crash.size(), resumed.seconds,
                resume_line.empty() ? "(no resume line)" : resume_line.substr(resume_line.find("resuming")).c_str());
    std::fflush(stdout);
  }
}

// mutation.batch "diverse" is a pure function of the round's members, the pool and the rows
// used: a run killed right after it appended the rows it chose takes the same rows again.
TEST_CASE("a diverse batch is chosen again, the same rows, after a crash at its append", "[resilience][crash][diverse]") {
  TempDir tmp;
  auto diverse = [](std::string cfg) {
    const std::string k = "\"k\": 10}";
    const size_t at = cfg.find(k);
    REQUIRE(at != std::string::npos);
    return cfg.replace(at, k.size(), "\"k\": 10, \"batch\": \"diverse\"}");
  };
  WriteText(tmp / "base.json", diverse(Config(tmp / "base")));
  auto base = RunEnsembled(tmp / "base.json", tmp.path(), NoCrash(), 90);
  INFO(base.out << base.err);
  REQUIRE(base.code == 0);
  const std::string state = tmp / "crashed";
  WriteText(tmp / "crashed.json", diverse(Config(state)));
  auto crashed = RunEnsembled(tmp / "crashed.json", tmp.path(), CrashAt("after_mutation_append"), 90);
  INFO("crashed run:\n" << crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  CrashSnapshot snap = Snapshot(state);
  CHECK(TrainHeader(state).rows == 210);  // round 0's 10 rows appended, not committed
  auto resumed = RunEnsembled(tmp / "crashed.json", tmp.path(), NoCrash(), 90);
  INFO("resumed run:\n" << resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  CheckResumedEqualsBaseline(tmp / "base", state, snap, tmp.path());  // pool_used of every round included
  // And they are not the 10 that "top" takes from the same members (the same run, batch top).
  WriteText(tmp / "top.json", Config(tmp / "top"));
  auto top = RunEnsembled(tmp / "top.json", tmp.path(), NoCrash(), 90);
  REQUIRE(top.code == 0);
  json by_diverse = CommitFacts(JournalOf(tmp / "base"))[0]["pool_used"];
  json by_top = CommitFacts(JournalOf(tmp / "top"))[0]["pool_used"];
  CHECK(by_diverse.size() == 10);
  CHECK(by_top.size() == 10);
  CHECK(by_diverse != by_top);
}

// A crash after the last round's round_committed record but before run_finished: the journal
// then says "every round committed" yet not "finished". The resumed run must finish the run.
TEST_CASE("a crash between the last round_committed and run_finished still ends in a finished run",
          "[resilience][crash]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", Config(state));
  auto crashed = RunEnsembled(tmp / "cfg.json", tmp.path(), CrashAt("after_round_commit:2"), 90);
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  REQUIRE(ReplayJournal(JournalOf(state)).committed.size() == static_cast<size_t>(kRounds));
  auto resumed = RunEnsembled(tmp / "cfg.json", tmp.path(), NoCrash(), 90);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  RunProgress p = ReplayJournal(JournalOf(state));
  CHECK(p.committed.size() == static_cast<size_t>(kRounds));
  CHECK(p.finished);  // fails today: nothing appends run_finished when next_round == rounds.count
  auto st = RunWithEnv({BinaryPath("ensemblectl"), "status", "--state-dir", state, "--json"}, tmp.path(), {}, 30);
  json s = json::parse(st.out, nullptr, false);
  CHECK((s.is_object() && s.value("finished", false)));
}

// stop_below_error reached in round 0: an undisturbed run stops after round 0. Crashing right
// after that round_committed (before run_finished) must not make the resumed run train round 1.
TEST_CASE("a crash after the converged round's commit does not train another round on resume",
          "[resilience][crash]") {
  TempDir tmp;
  WriteText(tmp / "base.json", Config(tmp / "base", R"(, "stop_below_error": 1000)"));
  auto base = RunEnsembled(tmp / "base.json", tmp.path(), NoCrash(), 90);
  INFO(base.out << base.err);
  REQUIRE(base.code == 0);
  RunProgress pb = ReplayJournal(JournalOf(tmp / "base"));
  REQUIRE(pb.finished);
  REQUIRE(pb.committed.size() == 1);  // converged in round 0

  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", Config(state, R"(, "stop_below_error": 1000)"));
  auto crashed = RunEnsembled(tmp / "cfg.json", tmp.path(), CrashAt("after_round_commit"), 90);
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  auto resumed = RunEnsembled(tmp / "cfg.json", tmp.path(), NoCrash(), 90);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  auto recs = JournalOf(state);
  RunProgress p = ReplayJournal(recs);
  CHECK(p.finished);
  CHECK(p.committed.size() == pb.committed.size());  // fails today: round 1 is trained and committed
  int round1_done = 0;
  for (const auto& r : recs) round1_done += r.value("event", "") == "member_done" && r.value("round", -1) == 1;
  CHECK(round1_done == 0);
}

}  // namespace
}  // namespace ens

namespace ens {
namespace {

// A worker killed while writing a member leaves <member>.tmp with partial files; one killed
// after its rename but before its "done" was journaled leaves a complete member directory the
// journal does not know. Both are normal debris of a crash, and the resumed run retrains those
// members over them. Here the crash is ENSEMBLED_CRASH_AT=after_dispatch and the debris is laid
// down as such killed workers leave it: m000.tmp/weights.bin cut in half (a worker killed
// mid-write) and m001/ complete (the very bits its retraining gives).
TEST_CASE("members whose killed attempts left <member>.tmp files or an unjournaled directory are retrained on resume",
          "[resilience][crash]") {
  TempDir tmp;
  const std::string fail_fast = R"( "max_task_attempts": 1,)";
  WriteText(tmp / "base.json", Config(tmp / "base", "", "1", fail_fast));
  auto base = RunEnsembled(tmp / "base.json", tmp.path(), NoCrash(), 90);
  INFO(base.out << base.err);
  REQUIRE(base.code == 0);
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", Config(state, "", "1", fail_fast));
  auto crashed = RunEnsembled(tmp / "cfg.json", tmp.path(), CrashAt("after_dispatch"), 90);
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  RunLayout b(tmp / "base"), s(state);
  std::string partial = s.MemberDir(0, "m000") + ".tmp";
  std::filesystem::create_directories(partial);
  const std::string weights = ReadText(b.MemberDir(0, "m000") + "/weights.bin");
  WriteText(partial + "/weights.bin", weights.substr(0, weights.size() / 2));
  std::filesystem::copy(b.MemberDir(0, "m001"), s.MemberDir(0, "m001"), std::filesystem::copy_options::recursive);
  REQUIRE(ReplayJournal(JournalOf(state)).done.empty());

  auto resumed = RunEnsembled(tmp / "cfg.json", tmp.path(), NoCrash(), 90);
  INFO("resumed run:\n" << resumed.out << resumed.err);
  REQUIRE_FALSE(resumed.timed_out);
  CHECK(resumed.err.find("killed by signal 11") == std::string::npos);
  CHECK(resumed.code == 0);
  CHECK(ReplayJournal(JournalOf(state)).finished);
  for (const char* m : {"m000", "m001"}) {
    INFO(m);
    CHECK_FALSE(std::filesystem::exists(s.MemberDir(0, m) + ".tmp"));
  }
  auto diffs = CompareRuns(tmp / "base", state, kRounds, kMembers, tmp.path(), CompareMode::kBytes);
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace
}  // namespace ens

namespace ens {
namespace {

// pack_size "auto": m000+m002 train as one fused pack, m001+m003 as another. A crash right after
// the first member_done of a pack leaves that pack half journaled; the resumed run re-runs the
// whole pack (its bits depend on its composition) but must not rewrite the member the journal
// already holds: its directory is the committed record, and replacing it opens a window in which
// a journaled member has no directory at all.
TEST_CASE("a crash inside a pack's reports does not rewrite the pack's journaled member on resume",
          "[resilience][crash][pack]") {
  TempDir tmp;
  WriteText(tmp / "base.json", Config(tmp / "base", "", "\"auto\"", R"( "max_task_attempts": 1,)"));
  auto base = RunEnsembled(tmp / "base.json", tmp.path(), NoCrash(), 90);
  INFO(base.out << base.err);
  REQUIRE(base.code == 0);
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", Config(state, "", "\"auto\"", R"( "max_task_attempts": 1,)"));
  auto crashed = RunEnsembled(tmp / "cfg.json", tmp.path(), CrashAt("after_member_done:1"), 90);
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  CrashSnapshot snap = Snapshot(state);
  // At least the first member_done batch is journaled (reports that came in together share one).
  REQUIRE(snap.done_mtimes.size() >= 1);
  REQUIRE(snap.done_mtimes.size() <= static_cast<size_t>(kMembers));  // all in round 0
  auto resumed = RunEnsembled(tmp / "cfg.json", tmp.path(), NoCrash(), 90);
  INFO("resumed run:\n" << resumed.out << resumed.err);
  REQUIRE_FALSE(resumed.timed_out);
  CHECK(resumed.err.find("killed by signal 11") == std::string::npos);
  REQUIRE(resumed.code == 0);
  CheckResumedEqualsBaseline(tmp / "base", state, snap, tmp.path());
}

}  // namespace
}  // namespace ens
