// The round's calibration (common/scoring/sigma_calibration.h) where users meet it: summary.json
// carries it, `ensemblectl predict` and `ensemblectl export` give the calibrated std by default
// (sqrt(scale^2 std^2 + noise^2) of the members' spread) and the raw one with --raw-sigma, and
// the exported module's std equals predict's.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/state/run_layout.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

std::vector<double> Column(const PredictedCsv& p, size_t c) {
  std::vector<double> out;
  for (const auto& row : p.rows) out.push_back(std::stod(row.at(c)));
  return out;
}

TEST_CASE("predict and export give the round's calibrated std, and the raw one on request", "[calibration]") {
  TempDir tmp;
  const std::string state = tmp / "state";
  json cfg = {{"run_name", "calibrated"}, {"state_dir", state}, {"run_seed", 3},
              {"resources", {{"gpus", "none"}, {"cpu_workers", 2}}},
              {"data", {{"synthetic", {{"features", 10}, {"initial_rows", 300}, {"pool_rows", 200}, {"holdout_rows", 400}}}}},
              {"members", {{"defaults", {{"layers", {{{"units", 16}, {"activation", "relu"}}}}, {"epochs", 30}}}, {"count", 4}}},
              {"rounds", {{"count", 2}}}};
  WriteText(tmp / "cfg.json", cfg.dump());
  auto run = Run({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path());
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const json summary = json::parse(ReadText(RunLayout(state).SummaryFile(1)));
  const json& e = summary["ensemble"];
  REQUIRE(e.contains("calibrated_coverage_2sigma"));
  REQUIRE(e["sigma_calibration"].size() == 1);
  const double scale = e["sigma_calibration"][0]["scale"], noise = e["sigma_calibration"][0]["noise"];
  CHECK((scale != 1.0 || noise != 0.0));  // a map that does something
  CHECK(e["calibrated_gaussian_nll"].get<double>() < e["ensemble_gaussian_nll"].get<double>());

  const std::string rows = "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.0\n"
                           "0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5\n0.9,0.1,0.9,0.1,0.9,0.1,0.9,0.1,0.9,0.1\n";
  const PredictedCsv calibrated = PredictCsv(tmp, state, rows);
  REQUIRE(calibrated.header == "row,mean,std");
  WriteText(tmp / "in.csv", rows);
  auto raw_run = Run({BinaryPath("ensemblectl"), "predict", "-s", state, "-i", tmp / "in.csv", "--raw-sigma"}, tmp.path());
  REQUIRE(raw_run.code == 0);
  PredictedCsv raw;
  {
    std::istringstream lines(raw_run.out);
    std::getline(lines, raw.header);
    for (std::string line; std::getline(lines, line);) {
      std::vector<std::string> cells;
      std::stringstream fields(line);
      for (std::string c; std::getline(fields, c, ',');) cells.push_back(c);
      raw.rows.push_back(cells);
    }
  }
  REQUIRE(raw.rows.size() == 3);
  const std::vector<double> mean = Column(calibrated, 1), cal = Column(calibrated, 2), spread = Column(raw, 2);
  CHECK(Column(raw, 1) == mean);  // the mean is never touched
  for (size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(cal[r] == Approx(std::sqrt(scale * scale * spread[r] * spread[r] + noise * noise)).epsilon(1e-5));
  }

  for (bool with_raw : {false, true}) {
    CAPTURE(with_raw);
    std::vector<std::string> argv = {BinaryPath("ensemblectl"), "export", "-s", state, "-o", tmp / "ensemble.pt"};
    if (with_raw) argv.push_back("--raw-sigma");
    auto exported = Run(argv, tmp.path());
    INFO(exported.out << exported.err);
    REQUIRE(exported.code == 0);
    auto called = Run({ENS_PYTHON, "-c",
                       "import sys, torch; m = torch.jit.load(sys.argv[1]); "
                       "x = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.0], [0.5] * 10, [0.9, 0.1] * 5]); "
                       "mean, std = m(x); print(' '.join(repr(v) for v in std.reshape(-1).tolist()))",
                       tmp / "ensemble.pt"},
                      tmp.path());
    INFO(called.out << called.err);
    REQUIRE(called.code == 0);
    std::istringstream printed(called.out);
    const std::vector<double>& want = with_raw ? spread : cal;
    for (size_t r = 0; r < 3; ++r) {
      double v = 0;
      printed >> v;
      CHECK(v == Approx(want[r]).epsilon(1e-5));
    }
  }
}

}  // namespace
}  // namespace ens
