// Resume checks the config (orchestrator/run/config_change.h), end to end with the real binaries:
// safe changes apply and are logged, results-changing ones are refused (exit 78) unless
// --accept-config-change opens a new config epoch, a finished run extends bit for bit as if it
// had been configured longer from the start, and a lowered rounds.count removes nothing.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "common/base/exit_codes.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string Config(const std::string& state, int rounds, double lr = 0.003, double heartbeat = 60) {
  return R"({"run_name": "resume", "state_dir": ")" + state + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 60, "pool_rows": 80, "holdout_rows": 40}},
    "members": {"defaults": {"layers": [{"units": 4}], "epochs": 2, "batch_size": 16, "lr": )" +
         std::to_string(lr) + R"(}, "count": 3},
    "mutation": {"policy": "query_by_committee", "k": 5},
    "rounds": {"count": )" + std::to_string(rounds) + R"(}, "heartbeat_timeout_s": )" + std::to_string(heartbeat) + "}";
}

RunResult Ensembled(const TempDir& tmp, const std::string& cfg, bool accept = false) {
  std::vector<std::string> argv = {BinaryPath("ensembled"), "run", "--config", cfg};
  if (accept) argv.push_back("--accept-config-change");
  return Run(argv, tmp.path());
}

int Committed(const std::string& state) {
  auto j = Journal::Open(RunLayout(state).JournalFile());
  REQUIRE(j.ok());
  return ReplayJournal((*j)->records()).next_round;
}

std::string MemberFile(const std::string& state, int round, const std::string& member, const std::string& file) {
  return ReadMemberText(RunLayout(state).MemberDir(round, member) + "/" + file);
}

TEST_CASE("a finished run extended to more rounds equals the run configured longer from the start", "[resume]") {
  TempDir tmp;
  const std::string a = tmp / "a", b = tmp / "b";
  WriteText(tmp / "a.json", Config(a, 2));
  auto first = Ensembled(tmp, tmp / "a.json");
  INFO(first.out << first.err);
  REQUIRE(first.code == 0);
  REQUIRE(Committed(a) == 2);

  // rounds.count 2 -> 4 and a heartbeat change: both safe, applied and logged on resume.
  WriteText(tmp / "a.json", Config(a, 4, 0.003, 90));
  auto more = Ensembled(tmp, tmp / "a.json");
  INFO(more.out << more.err);
  REQUIRE(more.code == 0);
  CHECK(more.err.find("config change applied on resume: /rounds/count: 2 -> 4") != std::string::npos);
  CHECK(more.err.find("/heartbeat_timeout_s: 60.0 -> 90.0") != std::string::npos);
  CHECK(more.out.find("extending the run") != std::string::npos);
  REQUIRE(Committed(a) == 4);

  WriteText(tmp / "b.json", Config(b, 4));
  auto longer = Ensembled(tmp, tmp / "b.json");
  INFO(longer.out << longer.err);
  REQUIRE(longer.code == 0);
  for (int round = 0; round < 4; ++round)
    for (const char* m : {"m000", "m001", "m002"}) {
      INFO("round " << round << " " << m);
      for (const char* f : {"holdout_pred.f32", "pool_pred.f32", "weights.bin"}) {
        std::string x = MemberFile(a, round, m, f);
        CHECK_FALSE(x.empty());
        CHECK(x == MemberFile(b, round, m, f));
      }
    }
  // The extension did decide round 1's mutation: round 2 trained on more rows than round 1.
  auto ja = Journal::Open(RunLayout(a).JournalFile());
  REQUIRE(ja.ok());
  auto pa = ReplayJournal((*ja)->records());
  REQUIRE(pa.committed.size() == 4);
  CHECK(pa.committed[2].trained_rows == pa.committed[1].trained_rows + 5);
}

TEST_CASE("a results-changing config change is refused on resume, naming each key, unless accepted", "[resume]") {
  TempDir tmp;
  const std::string s = tmp / "s";
  WriteText(tmp / "c.json", Config(s, 2));
  auto first = Ensembled(tmp, tmp / "c.json");
  REQUIRE(first.code == 0);

  WriteText(tmp / "c.json", Config(s, 3, 0.01));
  auto refused = Ensembled(tmp, tmp / "c.json");
  INFO(refused.out << refused.err);
  CHECK(refused.code == exit_code::kPermanentFailure);
  for (const char* want : {"/members/list/0/lr: 0.003 -> 0.01", "/members/list/2/lr", "--accept-config-change",
                           "state_dir", "config epoch 1 at round 2"})
    CHECK(refused.err.find(want) != std::string::npos);
  CHECK(Committed(s) == 2);  // nothing ran

  const std::string epoch0 = ReadText(RunLayout(s).ConfigFile());
  auto accepted = Ensembled(tmp, tmp / "c.json", /*accept=*/true);
  INFO(accepted.out << accepted.err);
  REQUIRE(accepted.code == 0);
  CHECK(Committed(s) == 3);
  auto j = Journal::Open(RunLayout(s).JournalFile());
  REQUIRE(j.ok());
  auto p = ReplayJournal((*j)->records());
  CHECK(p.config_epoch == 1);
  int changed = 0;
  for (const auto& r : (*j)->records())
    if (r.value("event", "") == "config_changed") {
      ++changed;
      CHECK(r.value("from_round", -1) == 2);
    }
  CHECK(changed == 1);
  auto status = Run({BinaryPath("ensemblectl"), "status", "-s", s}, tmp.path());
  CHECK(status.out.find("config epoch 1") != std::string::npos);
  // Rounds before the epoch keep their own config in member.json.
  CHECK(MemberFile(s, 1, "m000", "member.json").find("\"lr\": 0.003") != std::string::npos);
  CHECK(MemberFile(s, 2, "m000", "member.json").find("\"lr\": 0.01") != std::string::npos);
  // verify retrains a member of each epoch alone from its own recorded spec: the same bits.
  for (const char* round : {"1", "2"}) {
    auto v = Run({BinaryPath("ensemblectl"), "verify", "--state-dir", s, "--round", round, "--member", "m001"},
                 tmp.path());
    INFO("verify round " << round << ": " << v.out << v.err);
    CHECK(v.code == 0);
  }
  // The same config again: nothing to accept. Even when a crash left config.json at epoch 0
  // after the journal took epoch 1: the journal completes the record.
  WriteText(RunLayout(s).ConfigFile(), epoch0);
  auto again = Ensembled(tmp, tmp / "c.json");
  INFO(again.out << again.err);
  CHECK(again.code == 0);
  CHECK(again.out.find("already finished") != std::string::npos);
  CHECK(json::parse(ReadText(RunLayout(s).ConfigFile())).value("epoch", -1) == 1);
}

TEST_CASE("lowering rounds.count below the committed rounds finishes the run and removes nothing", "[resume]") {
  TempDir tmp;
  const std::string s = tmp / "s";
  WriteText(tmp / "c.json", Config(s, 3));
  REQUIRE(Ensembled(tmp, tmp / "c.json").code == 0);
  WriteText(tmp / "c.json", Config(s, 1));
  auto lowered = Ensembled(tmp, tmp / "c.json");
  INFO(lowered.out << lowered.err);
  CHECK(lowered.code == 0);
  CHECK(lowered.out.find("already finished") != std::string::npos);
  CHECK(lowered.out.find("rounds.count is 1; the 3 rounds committed stay") != std::string::npos);
  CHECK(Committed(s) == 3);
  for (int round = 0; round < 3; ++round) CHECK_FALSE(MemberFile(s, round, "m000", "holdout_pred.f32").empty());
}

}  // namespace
}  // namespace ens
