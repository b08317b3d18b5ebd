// Warm start in a whole run: from round 1 on, each member starts from its previous round's
// train state (recorded in its task), trains its warm_start_epochs, verifies bit for bit, and
// a run resumed (extended from 2 to 3 rounds) gives the same bits as one run of 3 rounds.
#include <catch2/catch.hpp>
#include <string>

#include "common/base/atomic_file.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

std::string Config(const std::string& state, int rounds) {
  return R"({"run_name": "warm", "state_dir": ")" + state + R"(", "run_seed": 3,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 300, "holdout_rows": 200}},
    "members": {"count": 3, "defaults": {"layers": [{"units": 32}], "epochs": 15, "lr": 0.003,
                                        "warm_start": true, "warm_start_epochs": 4}},
    "mutation": {"policy": "query_by_committee", "k": 20},
    "rounds": {"count": )" + std::to_string(rounds) + "}}";
}

TEST_CASE("warm-started members continue round to round, verify bit for bit and resume to the same bits") {
  TempDir tmp;
  WriteText(tmp / "a.json", Config(tmp / "a", 3));
  auto run = RunEnsembled(tmp / "a.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  RunLayout a(tmp / "a");
  for (int r = 0; r < 3; ++r) {
    const auto member = nlohmann::json::parse(ReadMemberText(a.MemberDir(r, "m001") + "/member.json"));
    const auto metrics = nlohmann::json::parse(ReadMemberText(a.MemberDir(r, "m001") + "/metrics.json"));
    INFO("round " << r << ": " << member["task"].dump() << "\n" << metrics.dump());
    CHECK(MemberFileExists(a.MemberDir(r, "m001") + "/train_state.pt"));
    if (r == 0) {
      CHECK_FALSE(member["task"].contains("warm_from"));
      CHECK(metrics["epochs_run"] == 15);
      continue;
    }
    CHECK(member["task"]["warm_from"] == a.MemberDir(r - 1, "m001") + "/train_state.pt");
    CHECK(metrics["warm_start"] == "warm");
    CHECK(metrics["epochs_run"] == 4);
  }

  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", tmp / "a", "--round", "2"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);

  // Two rounds, then the config raised to three: the resumed run continues from the states
  // its round 1 left, and round 2 has the same bits as in the run of three.
  WriteText(tmp / "b.json", Config(tmp / "b", 2));
  auto first = RunEnsembled(tmp / "b.json", tmp.path(), {}, 600);
  INFO(first.out << first.err);
  REQUIRE(first.code == 0);
  WriteText(tmp / "b.json", Config(tmp / "b", 3));
  auto extended = RunEnsembled(tmp / "b.json", tmp.path(), {}, 600);
  INFO(extended.out << extended.err);
  REQUIRE(extended.code == 0);
  RunLayout b(tmp / "b");
  for (const char* m : {"m000", "m001", "m002"}) {
    INFO(m);
    CHECK_FALSE(ReadMemberText(a.MemberDir(2, m) + "/holdout_pred.f32").empty());
    CHECK_FALSE(ReadMemberText(a.MemberDir(2, m) + "/train_state.pt").empty());
    CHECK(ReadMemberText(b.MemberDir(2, m) + "/holdout_pred.f32") == ReadMemberText(a.MemberDir(2, m) + "/holdout_pred.f32"));
    CHECK(ReadMemberText(b.MemberDir(2, m) + "/train_state.pt") == ReadMemberText(a.MemberDir(2, m) + "/train_state.pt"));
  }
}

}  // namespace
}  // namespace ens
