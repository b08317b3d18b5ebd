// examples/active_learning.py as the mutation command of a run of 4 PyTorch command members
// (examples/torch_member.py) and 4 built-in members, for 3 rounds: it generates its own
// candidates, scores them with the round's ensemble (ensemblectl predict --input -, through
// predict_argv for the command members; one batch here, as each batch runs every command
// member's predict_argv once: tests/predict_stream_test.cpp has several), labels the most
// uncertain and drops the oldest rows.
// The ensemble's holdout error must fall, dropped rows must be gone from training, and the
// training-row counts must be right in the journal, the summaries, the mutation's view and
// the members.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/base/atomic_file.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/python_imports.h"
#include "support/npy_ids.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

TEST_CASE("active learning with its own candidates over mixed command and built-in members") {
  TempDir d;
  SkipUnlessPythonImports(ENS_PYTHON, "torch, numpy");
  const std::string py = ENS_PYTHON, src = ENS_SOURCE_DIR;
  const std::string member = src + "/examples/torch_member.py";
  const std::string model = R"({"kind": "command", "argv": [")" + py + R"(", ")" + member +
                            R"(", "--epochs", "20"], "predict_argv": [")" + py + R"(", ")" + member + R"(", "predict"]})";
  WriteText(d / "run.json", R"({"run_name": "al", "state_dir": ")" + d / "state" + R"(", "run_seed": 11,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 100, "pool_rows": 50, "holdout_rows": 400}},
    "members": {"defaults": {"epochs": 80, "lr": 0.01, "layers": [{"units": 32}, {"units": 32}]},
                "variants": [{"model": )" + model + R"(}, {}], "count": 8},
    "mutation": {"policy": "command", "timeout_s": 300,
                 "argv": [")" + py + R"(", ")" + src + R"(/examples/active_learning.py", "--k", "30",
                          "--drop", "5", "--candidates", "300", "--batch", "300"]},
    "rounds": {"count": 3}})");
  auto run = RunEnsembled(d / "run.json", d.path(), {}, 900);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const std::string state = d / "state";
  RunLayout layout(state);
  auto recs = JournalOf(state);

  std::vector<uint64_t> trained;
  std::vector<double> rmse;
  for (const auto& r : recs)
    if (r.value("event", "") == "round_committed") {
      trained.push_back(r.value("trained_rows", uint64_t{0}));
      rmse.push_back(r["summary"].value("ensemble_rmse", 0.0));
    }
  // +30 labelled, -5 oldest per round.
  CHECK(trained == std::vector<uint64_t>{100, 125, 150});
  REQUIRE(rmse.size() == 3);
  INFO("ensemble holdout RMSE by round: " << rmse[0] << " " << rmse[1] << " " << rmse[2]);
  CHECK(rmse[2] < rmse[0]);
  CHECK(ReplayJournal(recs).training_rows() == 150);

  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    const auto summary = nlohmann::json::parse(ReadText(layout.SummaryFile(round)));
    CHECK(summary["train_rows"] == 100 + 25 * round);
    CHECK(summary["members"].size() == 8);
    // Every member, command members included, was handed exactly the rows left.
    for (const auto& m : summary["members"]) {
      CHECK(m["train_rows"].get<uint64_t>() + m["val_rows"].get<uint64_t>() == 100u + 25u * round);
    }
    if (round == 2) continue;  // the last round decides no mutation
    // What the mutation saw: the rows trained on, the 5 oldest of earlier rounds gone.
    const auto ids = ReadInt64Npy(layout.RoundDir(round) + "/mutation/train_row_ids.npy");
    CHECK(ids.size() == 100u + 25u * round);
    REQUIRE_FALSE(ids.empty());
    CHECK(ids.front() == 5 * round);  // rows 0 .. 5 * round - 1 were dropped
  }
  // The variants alternate: m000 is a PyTorch command member, m001 a built-in one.
  const auto metrics = nlohmann::json::parse(ReadMemberText(layout.MemberDir(2, "m000") + "/metrics.json"));
  CHECK(metrics["device"] == "command");
  CHECK(metrics["command"]["epochs"] == 20);
  CHECK(nlohmann::json::parse(ReadMemberText(layout.MemberDir(2, "m001") + "/metrics.json"))["device"] == "cpu");
}

}  // namespace
}  // namespace ens
