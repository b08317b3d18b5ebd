// Classification in a whole run: string labels in CSV files, the class list in run.json, a
// stratified holdout, fused packs of classifiers with label smoothing, query by committee
// scored by BALD, the ensemble's accuracy far above chance, `ensemblectl predict` printing
// class, probabilities and disagreement, bitwise `verify`, and a mutation command that adds
// a label the run does not have (refused, naming the row).
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "support/env_spawn.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

// Three Gaussian blobs in 4-D (std 1, centres about 3.2 apart): about 92% separable.
std::string Blobs(int rows, uint64_t seed) {
  const char* names[] = {"blue", "green", "red"};
  const double centre[3][4] = {{0, 0, 0, 0}, {3, 0, 0, 1}, {0, 3, 1, 0}};
  SeededRng rng(seed);
  std::ostringstream out;
  out << "a,b,c,d,colour\n";
  for (int r = 0; r < rows; ++r) {
    const int k = static_cast<int>(rng.Below(3));
    for (int f = 0; f < 4; ++f) out << centre[k][f] + rng.Normal() << ",";
    out << names[k] << "\n";
  }
  return out.str();
}

std::string Config(const TempDir& tmp, const std::string& mutation, int rounds) {
  return R"({"run_name": "cls", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 5, "task": "classification",
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"source": "csv", "train_path": "train.csv", "pool_path": "pool.csv", "target_column": "colour",
             "holdout_fraction": 0.3},
    "members": {"count": 6, "defaults": {"epochs": 30, "layers": [{"units": 16, "activation": "tanh"}], "lr": 0.01},
                "variants": [{"label_smoothing": 0.05}, {"label_smoothing": 0.0}]},
    "mutation": )" + mutation + R"(,
    "rounds": {"count": )" + std::to_string(rounds) + "}}";
}

TEST_CASE("a classification run learns the classes, predicts them and verifies bit for bit") {
  TempDir tmp;
  WriteText(tmp / "train.csv", Blobs(300, 1));
  WriteText(tmp / "pool.csv", Blobs(300, 2));
  WriteText(tmp / "run.json", Config(tmp, R"({"policy": "query_by_committee", "k": 40})", 2));
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const std::string state = tmp / "state";
  CHECK_THAT(run.out, Catch::Contains("ensemble accuracy"));

  const auto run_json = nlohmann::json::parse(ReadText(state + "/run.json"));
  CHECK(run_json["task"] == "classification");
  CHECK(run_json["classes"] == nlohmann::json({"blue", "green", "red"}));
  CHECK(run_json["holdout_rows"] == 90);

  RunLayout layout(state);
  const auto s0 = nlohmann::json::parse(ReadText(layout.SummaryFile(0)));
  const auto s1 = nlohmann::json::parse(ReadText(layout.SummaryFile(1)));
  CHECK(s0["mutation"]["added"] == 40);
  CHECK(s1["train_rows"] == 210 + 40);
  for (const auto* s : {&s0, &s1}) {
    const auto& e = (*s)["ensemble"];
    INFO(e.dump());
    CHECK(e["classes"] == 3);
    CHECK(e["ensemble_accuracy"].get<double>() > 0.8);  // chance: about 1/3
    CHECK(e["ensemble_nll"].get<double>() < 0.6);        // a uniform guess: ln 3 = 1.10
    CHECK(e["ensemble_error"].get<double>() == Approx(1.0 - e["ensemble_accuracy"].get<double>()));
    CHECK(e["mean_disagreement"].get<double>() >= 0.0);
    CHECK(e["ensemble_ece"].get<double>() >= 0.0);  // 15 bins of confidence against accuracy
    CHECK(e["ensemble_ece"].get<double>() <= 1.0);
    CHECK_FALSE(e.contains("coverage_1sigma"));
  }
  // ensemblectl status: NLL and ECE in each round's line.
  auto status = Run({BinaryPath("ensemblectl"), "status", "-s", state}, tmp.path());
  INFO(status.out << status.err);
  CHECK(status.code == 0);
  CHECK_THAT(status.out, Catch::Contains("NLL") && Catch::Contains("ECE"));
  char ece[32];
  std::snprintf(ece, sizeof(ece), "%.4f", s1["ensemble"]["ensemble_ece"].get<double>());
  CHECK_THAT(status.out, Catch::Contains(ece));
  // Fused: compatible classifiers trained as packs.
  const auto m0 = nlohmann::json::parse(ReadMemberText(layout.MemberDir(0, "m000") + "/metrics.json"));
  CHECK(m0.value("pack_size", 1) > 1);
  CHECK(m0.contains("holdout_accuracy"));

  // predict: the class, a probability per class, the disagreement; a row at a blob's centre
  // gets that blob's class.
  const PredictedCsv predicted = PredictCsv(tmp, state, "a,b,c,d\n0,0,0,0\n3,0,0,1\n0,3,1,0\n");
  CHECK(predicted.header == "row,class,p_blue,p_green,p_red,disagreement");
  REQUIRE(predicted.rows.size() == 3);
  for (size_t r = 0; r < 3; ++r) {
    const char* want = r == 0 ? "blue" : r == 1 ? "green" : "red";
    const std::vector<std::string>& cells = predicted.rows[r];
    REQUIRE(cells.size() == 6);
    CHECK(cells[1] == want);
    CHECK(std::stod(cells[2]) + std::stod(cells[3]) + std::stod(cells[4]) == Approx(1.0).epsilon(1e-4));
  }

  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", state, "--round", "1"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
}

TEST_CASE("a mutation command that adds a label the run does not have fails naming the row") {
  TempDir tmp;
  WriteText(tmp / "train.csv", Blobs(120, 3));
  WriteText(tmp / "pool.csv", Blobs(10, 4));
  WriteText(tmp / "add.sh", "#!/bin/sh\ncat >/dev/null\necho '{\"add\": [[0, 0, 0, 0, \"red\"], [1, 1, 1, 1, \"purple\"]]}'\n");
  REQUIRE(::chmod((tmp / "add.sh").c_str(), 0755) == 0);
  std::string cfg = Config(tmp, R"({"policy": "command", "argv": [")" + tmp / "add.sh" + R"("]})", 2);
  WriteText(tmp / "run.json", cfg);
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 300);
  INFO(run.out << run.err);
  CHECK(run.code != 0);
  CHECK_THAT(run.err, Catch::Contains("/add/1/4") && Catch::Contains("label 'purple' is not one of the run's 3 classes"));
  CHECK(CountEvents(JournalOf(tmp / "state"), "round_committed") == 0);
}

}  // namespace
}  // namespace ens
