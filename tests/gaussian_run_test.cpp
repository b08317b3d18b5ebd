// Gaussian heads in a whole run (loss gaussian_nll): each member predicts a mean and a
// variance; the round summary scores the mixture (RMSE of its mean, its holdout NLL, the
// aleatoric and epistemic std); query by committee picks rows by the epistemic std;
// `ensemblectl predict` prints the mixture's mean and its three stds; `export` writes a module
// returning them; `verify` finds every member bit for bit.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <string>

#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

TEST_CASE("a run of Gaussian heads scores its mixture, predicts its uncertainty and verifies bit for bit") {
  TempDir tmp;
  WriteText(tmp / "run.json", R"({"run_name": "gauss", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 11,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 300, "holdout_rows": 300, "noise": 1.0}},
    "members": {"count": 4, "defaults": {"epochs": 40, "layers": [{"units": 32}], "loss": "gaussian_nll", "lr": 0.003}},
    "mutation": {"policy": "query_by_committee", "k": 30},
    "rounds": {"count": 2}})");
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const std::string state = tmp / "state";
  const auto config = nlohmann::json::parse(ReadText(state + "/config.json"));
  CHECK(config.dump().find("\"epistemic\"") != std::string::npos);  // the default score of Gaussian heads

  RunLayout layout(state);
  for (int r = 0; r < 2; ++r) {
    const auto summary = nlohmann::json::parse(ReadText(layout.SummaryFile(r)));
    const auto& e = summary["ensemble"];
    INFO(e.dump());
    // Friedman #1 with noise 1: the targets spread ~5; a mean that learned something is far below.
    CHECK(e["ensemble_rmse"].get<double>() < 3.0);
    // The NLL of N(y; mean, 5^2) would be ~3.0; a mixture that models its noise does better.
    CHECK(e["ensemble_nll"].get<double>() < 2.6);
    CHECK(e["mean_aleatoric_std"].get<double>() > 0.3);
    CHECK(e["mean_epistemic_std"].get<double>() > 0.0);
    CHECK(e["mean_disagreement"] == e["mean_epistemic_std"]);
    // Calibration of the mixture's mean +- its total std on the holdout.
    const double c1 = e["coverage_1sigma"].get<double>(), c2 = e["coverage_2sigma"].get<double>();
    CHECK(c1 >= 0.0);
    CHECK(c1 <= c2);
    CHECK(c2 <= 1.0);
    CHECK(c2 > 0.5);  // a Gaussian's 2 sigma holds 95%; a head that models its noise is not far off
    CHECK(std::isfinite(e["ensemble_gaussian_nll"].get<double>()));
    for (const auto& m : summary["members"]) CHECK(m.contains("holdout_nll"));
  }

  const PredictedCsv predicted = PredictCsv(tmp, state,
                                            "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5\n"
                                            "0.1,0.9,0.2,0.8,0.3,0.7,0.4,0.6,0.5,0.5\n");
  CHECK(predicted.header == "row,mean,aleatoric_std,epistemic_std,total_std");
  CHECK(predicted.rows.size() == 2);
  // The total std is the round's calibrated one: sqrt(scale^2 (aleatoric^2 + epistemic^2) + noise^2)
  // with the round's map (common/scoring/sigma_calibration.h).
  const nlohmann::json map = nlohmann::json::parse(ReadText(layout.SummaryFile(1)))["ensemble"]["sigma_calibration"][0];
  const double scale = map["scale"], noise = map["noise"];
  for (const auto& cells : predicted.rows) {
    const std::vector<double> v = Numbers(cells);
    REQUIRE(v.size() == 5);
    CHECK(v[2] > 0.0);
    const double raw2 = v[2] * v[2] + v[3] * v[3];  // aleatoric^2 + epistemic^2
    CHECK(v[4] * v[4] == Approx(scale * scale * raw2 + noise * noise).epsilon(1e-4));
  }

  auto exported = Run({BinaryPath("ensemblectl"), "export", "-s", state, "-o", tmp / "ensemble.pt"}, tmp.path());
  INFO(exported.out << exported.err);
  CHECK(exported.code == 0);

  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", state, "--round", "1"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
}

}  // namespace
}  // namespace ens
