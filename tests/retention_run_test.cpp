// Retention in whole runs (common/state/retention.h): with keep_rounds 2 a run of five warm-started
// rounds keeps every file of its last two rounds, the train state of the round before them and
// the records of the rest; the journal says so; predict and export refuse a pruned round by
// name, verify of the oldest kept round still retrains bit for bit, and status shows the state
// directory's size. A supervisor killed between journaling a pruning and removing its files
// finishes the removal when the run resumes.
#include <signal.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/base/exit_codes.h"
#include "common/state/member_view.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;
namespace fs = std::filesystem;

std::string Config(const std::string& state, const std::string& retention, const std::string& layout = "members") {
  return R"({"run_name": "keep", "state_dir": ")" + state + R"(", "run_seed": 5, "results_layout": ")" + layout + R"(",
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 200, "holdout_rows": 80}},
    "members": {"count": 3, "defaults": {"layers": [{"units": 8}], "epochs": 6, "batch_size": 16,
                                        "warm_start": true, "warm_start_epochs": 2}},
    "mutation": {"policy": "query_by_committee", "k": 10},
    "retention": )" + retention + R"(,
    "rounds": {"count": 5}})";
}

// Its own file, or its span of its pack's (results_layout "packs": member_view.h).
bool Has(const RunLayout& a, int round, const std::string& file) {
  return MemberFileExists(a.MemberDir(round, "m001") + "/" + file);
}

// Round r's member m001 holds exactly the files its level keeps.
void CheckLevel(const RunLayout& a, int round, const std::string& level) {
  INFO("round " << round << " at level " << level);
  for (const char* record : {"member.json", "metrics.json", "history.jsonl"}) CHECK(Has(a, round, record));
  CHECK(fs::exists(a.SummaryFile(round)));
  const bool all = level == "all";
  CHECK(Has(a, round, "weights.bin") == all);
  CHECK(Has(a, round, "pool_pred.f32") == all);
  CHECK(Has(a, round, "holdout_pred.f32") == all);
  CHECK(Has(a, round, "train_state.pt") == (level != "records"));
}

TEST_CASE("keep_rounds 2 keeps the last two rounds whole and the records of every round", "[retention]") {
  TempDir tmp;
  // "packs": the three members of a round share one pack directory and have none of their own;
  // retention removes the same files from it, and a warm start reads its train state span.
  const std::string layout = GENERATE(std::string("members"), std::string("packs"));
  INFO("results_layout " << layout);
  WriteText(tmp / "a.json", Config(tmp / "a", R"({"keep_rounds": 2})", layout));
  auto run = RunEnsembled(tmp / "a.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  RunLayout a(tmp / "a");
  CHECK(fs::exists(a.MemberDir(4, "m001")) == (layout == "members"));
  CHECK(fs::exists(a.RoundDir(4) + "/packs/r4-m000-a1/members.jsonl") == (layout == "packs"));
  CheckLevel(a, 0, "records");
  CheckLevel(a, 1, "records");
  CheckLevel(a, 2, "train_state");
  CheckLevel(a, 3, "all");
  CheckLevel(a, 4, "all");
  std::map<int, std::string> last_level;
  for (const json& r : JournalOf(tmp / "a"))
    if (r.value("event", "") == "round_pruned") last_level[r["round"].get<int>()] = r["files"].get<std::string>();
  CHECK(last_level == std::map<int, std::string>{{0, "records"}, {1, "records"}, {2, "train_state"}});

  const std::vector<std::string> predict = {BinaryPath("ensemblectl"), "predict", "-s", tmp / "a", "--round", "1",
                                            "-i", tmp / "none.csv"};
  const std::vector<std::string> exp = {BinaryPath("ensemblectl"), "export", "-s", tmp / "a", "--round", "1",
                                        "-o", tmp / "e.pt"};
  for (const auto& argv : {predict, exp}) {
    auto refused = Run(argv, tmp.path());
    INFO(argv[1] << ": " << refused.out << refused.err);
    CHECK(refused.code == exit_code::kUsage);
    CHECK_THAT(refused.err, Catch::Contains("round 1's predictions and checkpoints were removed by the run's "
                                            "retention policy"));
    CHECK_THAT(refused.err, Catch::Contains("rounds that still have them: 3-4"));
  }
  // Round 3 warm-started from round 2's train state, which the policy kept for this.
  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", tmp / "a", "--round", "3"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);

  auto status = Run({BinaryPath("ensemblectl"), "status", "-s", tmp / "a", "--json"}, tmp.path());
  INFO(status.out << status.err);
  REQUIRE(status.code == 0);
  const json st = json::parse(status.out);
  CHECK(st["round_files"] == json{{"all", 2}, {"train_state", 1}, {"records", 2}});
  CHECK(st["state_dir_bytes"].get<uint64_t>() > 0);
  auto text = Run({BinaryPath("ensemblectl"), "status", "-s", tmp / "a"}, tmp.path());
  CHECK_THAT(text.out, Catch::Contains("disk: "));
  CHECK_THAT(text.out, Catch::Contains("retention: 2 committed round(s) keep every file, 1 their train state, 2 "
                                       "their records only"));
}

TEST_CASE("a supervisor killed after journaling a pruning removes the files when the run resumes", "[retention]") {
  TempDir tmp;
  WriteText(tmp / "b.json", Config(tmp / "b", R"({"keep_rounds": 1, "pin": [1]})"));
  auto crashed = RunEnsembled(tmp / "b.json", tmp.path(), {{{"ENSEMBLED_CRASH_AT", "after_round_pruned"}}, {}}, 600);
  INFO(crashed.out << crashed.err);
  REQUIRE(crashed.code == 128 + SIGKILL);
  RunLayout b(tmp / "b");
  // Killed after round 1's commit had journaled round 0 down to its train state (round 1 is
  // pinned): nothing removed yet.
  CHECK(Has(b, 0, "weights.bin"));
  auto resumed = RunEnsembled(tmp / "b.json", tmp.path(), {{}, {"ENSEMBLED_CRASH_AT"}}, 600);
  INFO(resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  CheckLevel(b, 0, "train_state");
  CheckLevel(b, 1, "all");
  CheckLevel(b, 2, "records");
  CheckLevel(b, 3, "train_state");
  CheckLevel(b, 4, "all");
}

}  // namespace
}  // namespace ens
