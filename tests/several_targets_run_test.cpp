// Several regression targets in a whole run (data.target_columns): the members predict every
// target; the round summary scores each target and their mean; query by committee ranks pool
// rows by the spread averaged over the targets; `ensemblectl predict` prints a mean and a std
// per target, `export` writes a module returning [n, targets], and `verify` finds every
// member bit for bit. A run whose members cannot predict several targets is refused before
// it starts, at the pointer (target_columns) or the file (an npy y of several columns).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/data/npy_writer.h"
#include "common/state/run_layout.h"
#include "common/base/seed.h"
#include "support/env_spawn.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/python_imports.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

// Rows of x0..x4 ~ U[0,1] and two targets on different scales:
//   a = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + noise 0.5   (std ~4)
//   b = 1000 (x3 + x4) + noise 20                          (std ~400)
struct TwoTargetData {
  std::vector<float> x, a, b;
  explicit TwoTargetData(int rows, uint64_t seed) {
    SeededRng rng(seed);
    for (int r = 0; r < rows; ++r) {
      float v[5];
      for (float& f : v) f = static_cast<float>(rng.Uniform());
      x.insert(x.end(), v, v + 5);
      a.push_back(static_cast<float>(10 * std::sin(M_PI * v[0] * v[1]) + 20 * (v[2] - 0.5) * (v[2] - 0.5) + 0.5 * rng.Normal()));
      b.push_back(static_cast<float>(1000 * (v[3] + v[4]) + 20 * rng.Normal()));
    }
  }
  std::string Csv() const {
    std::ostringstream o;
    o << "x0,b,x1,x2,a,x3,x4\n";
    for (size_t r = 0; r < a.size(); ++r)
      o << x[r * 5] << "," << b[r] << "," << x[r * 5 + 1] << "," << x[r * 5 + 2] << "," << a[r] << "," << x[r * 5 + 3]
        << "," << x[r * 5 + 4] << "\n";
    return o.str();
  }
};

double Std(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float y : v) sum += y, sq += static_cast<double>(y) * y;
  const double n = static_cast<double>(v.size());
  return std::sqrt(sq / n - (sum / n) * (sum / n));
}

std::string Config(const TempDir& tmp, const std::string& data, const std::string& members) {
  return R"({"run_name": "targets", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": )" + data + R"(,
    "members": )" + members + R"(,
    "mutation": {"policy": "query_by_committee", "k": 40},
    "rounds": {"count": 2}})";
}

const char* kMembers = R"({"count": 4, "defaults": {"epochs": 60, "layers": [{"units": 32}], "lr": 0.003}})";

TEST_CASE("a run of two targets scores each, predicts and exports both, and verifies bit for bit") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  const TwoTargetData train(500, 1), pool(300, 2);
  WriteText(tmp / "train.csv", train.Csv());
  WriteText(tmp / "pool.csv", pool.Csv());
  const std::string data = R"({"source": "csv", "train_path": "train.csv", "pool_path": "pool.csv",
    "target_columns": ["a", "b"], "holdout_fraction": 0.3})";
  WriteText(tmp / "run.json", Config(tmp, data, kMembers));
  auto validated = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "run.json"}, tmp.path());
  INFO(validated.out << validated.err);
  REQUIRE(validated.code == 0);
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  CHECK_THAT(run.out, Catch::Contains("| ensemble RMSE ") && Catch::Contains(" (per target "));
  const std::string state = tmp / "state";
  RunLayout layout(state);
  const auto run_json = nlohmann::json::parse(ReadText(layout.RunFile()));
  CHECK(run_json["targets"] == 2);
  CHECK(run_json["target_names"] == nlohmann::json({"a", "b"}));
  CHECK(run_json["feature_names"] == nlohmann::json({"x0", "x1", "x2", "x3", "x4"}));

  // A constant predictor's RMSE is the target's std (~4 and ~400): both are learned.
  const double std_a = Std(train.a), std_b = Std(train.b);
  for (int r = 0; r < 2; ++r) {
    const auto summary = nlohmann::json::parse(ReadText(layout.SummaryFile(r)));
    const auto& e = summary["ensemble"];
    INFO(e.dump());
    REQUIRE(e["ensemble_rmse_per_target"].size() == 2);
    const double ra = e["ensemble_rmse_per_target"][0], rb = e["ensemble_rmse_per_target"][1];
    CHECK(ra < 0.5 * std_a);
    CHECK(rb < 0.25 * std_b);
    CHECK(e["ensemble_rmse"].get<double>() == Approx((ra + rb) / 2));
    CHECK(e["mean_disagreement"].get<double>() > 0.0);
    // Calibration per target (each in [0, 1], 2 sigma covering at least what 1 sigma does), and the means.
    REQUIRE(e["coverage_1sigma_per_target"].size() == 2);
    REQUIRE(e["coverage_2sigma_per_target"].size() == 2);
    REQUIRE(e["ensemble_gaussian_nll_per_target"].size() == 2);
    for (int t = 0; t < 2; ++t) {
      const double c1 = e["coverage_1sigma_per_target"][t], c2 = e["coverage_2sigma_per_target"][t];
      CHECK(0.0 <= c1);
      CHECK(c1 <= c2);
      CHECK(c2 <= 1.0);
    }
    CHECK(e["coverage_1sigma"].get<double>() ==
          Approx((e["coverage_1sigma_per_target"][0].get<double>() + e["coverage_1sigma_per_target"][1].get<double>()) / 2));
    CHECK(e["ensemble_gaussian_nll"].get<double>() ==
          Approx((e["ensemble_gaussian_nll_per_target"][0].get<double>() +
                  e["ensemble_gaussian_nll_per_target"][1].get<double>()) / 2));
    for (const auto& m : summary["members"]) CHECK(m["holdout_rmse_per_target"].size() == 2);
  }

  const PredictedCsv predicted = PredictCsv(tmp, state, "x0,x1,x2,x3,x4\n0.5,0.5,0.5,0.5,0.5\n0.9,0.9,0.1,0.1,0.2\n");
  CHECK(predicted.header == "row,a_mean,a_std,b_mean,b_std");
  REQUIRE(predicted.rows.size() == 2);
  std::vector<std::vector<double>> rows;
  for (const auto& cells : predicted.rows) {
    rows.push_back(Numbers(cells));
    REQUIRE(rows.back().size() == 5);
  }
  CHECK(std::abs(rows[0][3] - 1000.0) < 150.0);  // b at x3 = x4 = 0.5
  CHECK(std::abs(rows[1][3] - 300.0) < 150.0);   // b at 0.1, 0.2
  CHECK(std::abs(rows[0][1] - 10 * std::sin(M_PI * 0.25)) < 2.5);  // a at 0.5, 0.5, 0.5

  auto exported = Run({BinaryPath("ensemblectl"), "export", "-s", state, "-o", tmp / "ensemble.pt"}, tmp.path());
  INFO(exported.out << exported.err);
  REQUIRE(exported.code == 0);
  auto called = Run({ENS_PYTHON, "-c",
                     "import sys, torch; m = torch.jit.load(sys.argv[1]); "
                     "mean, std = m(torch.tensor([[0.5] * 5, [0.9, 0.9, 0.1, 0.1, 0.2]])); "
                     "assert mean.shape == (2, 2) and std.shape == (2, 2), (mean.shape, std.shape); "
                     "print(mean[0, 1].item(), mean[1, 1].item())",
                     tmp / "ensemble.pt"},
                    tmp.path());
  INFO(called.out << called.err);
  REQUIRE(called.code == 0);
  std::istringstream printed(called.out);
  double b0 = 0, b1 = 0;
  printed >> b0 >> b1;
  CHECK(b0 == Approx(rows[0][3]).epsilon(1e-4));  // the module and predict agree
  CHECK(b1 == Approx(rows[1][3]).epsilon(1e-4));

  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", state, "--round", "1"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
}

TEST_CASE("members that predict one target are refused for several, at the pointer or the y file") {
  TempDir tmp;
  const TwoTargetData train(50, 3);
  WriteText(tmp / "train.csv", train.Csv());
  const char* gaussian = R"({"count": 2, "defaults": {"loss": "gaussian_nll", "layers": [{"units": 4}]}})";
  WriteText(tmp / "csv.json", Config(tmp, R"({"source": "csv", "train_path": "train.csv", "target_columns": ["a", "b"]})", gaussian));
  auto csv = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "csv.json"}, tmp.path());
  INFO(csv.out << csv.err);
  CHECK(csv.code == 78);
  CHECK_THAT(csv.out, Catch::Contains("/data/target_columns: target_columns gives 2 targets; member m000 has a gaussian_nll head"));

  // An npy y of shape (rows, 2): only the file says there are two targets.
  std::vector<float> y;
  for (size_t r = 0; r < train.a.size(); ++r) y.push_back(train.a[r]), y.push_back(train.b[r]);
  REQUIRE(WriteNpyFloat32(tmp / "t.x.npy", train.x.data(), train.a.size(), 5, 5).ok());
  REQUIRE(WriteNpyFloat32(tmp / "t.y.npy", y.data(), train.a.size(), 2, 2).ok());
  WriteText(tmp / "npy.json", Config(tmp, R"({"source": "npy", "train_path": "t"})", gaussian));
  auto npy = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "npy.json"}, tmp.path());
  INFO(npy.out << npy.err);
  CHECK(npy.code == 78);
  CHECK_THAT(npy.out, Catch::Contains("/data/y_path: " + tmp / "t.y.npy" + " gives 2 targets"));
  auto run = RunEnsembled(tmp / "npy.json", tmp.path(), {}, 120);
  INFO(run.out << run.err);
  CHECK(run.code != 0);
  CHECK_THAT(run.err, Catch::Contains("t.y.npy gives 2 targets; member m000 has a gaussian_nll head"));
  // With members that predict several, the same files run (validate-config reads y's width).
  WriteText(tmp / "npy_ok.json", Config(tmp, R"({"source": "npy", "train_path": "t"})",
                                        R"({"count": 2, "defaults": {"epochs": 2, "layers": [{"units": 4}]}})"));
  auto ok = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "npy_ok.json"}, tmp.path());
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
}

}  // namespace
}  // namespace ens
