// TorchScript members in a whole run, with the example model (examples/torchscript/model.py)
// saved by the venv's Python torch: validate-config and ensembled refuse a module of the wrong
// width at its config pointer; a run of the example trains, beats a constant predictor,
// predicts, exports and verifies bit for bit.
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/python_imports.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

std::string Config(const TempDir& tmp, const std::string& model) {
  return R"({"run_name": "script", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 300, "holdout_rows": 300, "noise": 0.5}},
    "members": {"count": 3, "defaults": {"model": {"kind": "torchscript", "path": ")" + model + R"("},
                                        "lr": 0.003, "epochs": 40}},
    "mutation": {"policy": "query_by_committee", "k": 30},
    "rounds": {"count": 2}})";
}

TEST_CASE("the example TorchScript model trains in a run, predicts, exports and verifies bit for bit") {
  TempDir tmp;
  SkipUnlessPythonImports(ENS_PYTHON, "torch");
  const std::string example = std::string(ENS_SOURCE_DIR) + "/examples/torchscript/model.py";
  for (auto [outputs, file] : {std::pair{"1", "model.pt"}, std::pair{"3", "wide.pt"}}) {
    auto made = Run({ENS_PYTHON, example, "--features", "10", "--outputs", outputs, "--output", tmp / file}, tmp.path());
    INFO(made.out << made.err);
    REQUIRE(made.code == 0);
  }

  // A module of the wrong width: an error at the pointer that names the file, before training.
  WriteText(tmp / "wide.json", Config(tmp, "wide.pt"));
  auto invalid = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "wide.json"}, tmp.path());
  INFO(invalid.out << invalid.err);
  CHECK(invalid.code != 0);
  CHECK(invalid.out.find("/members/defaults/model/path: " + tmp / "wide.pt") != std::string::npos);
  CHECK(invalid.out.find("returned [2, 3]; this run needs [2, 1]") != std::string::npos);
  auto refused = RunEnsembled(tmp / "wide.json", tmp.path(), {}, 120);
  INFO(refused.out << refused.err);
  CHECK(refused.code != 0);
  CHECK((refused.out + refused.err).find("/members/defaults/model/path") != std::string::npos);
  std::filesystem::remove_all(tmp / "state");

  WriteText(tmp / "run.json", Config(tmp, "model.pt"));
  auto valid = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "run.json"}, tmp.path());
  INFO(valid.out << valid.err);
  REQUIRE(valid.code == 0);
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);

  const std::string state = tmp / "state";
  RunLayout layout(state);
  for (int r = 0; r < 2; ++r) {
    const auto summary = nlohmann::json::parse(ReadText(layout.SummaryFile(r)));
    INFO(summary["ensemble"].dump());
    // Friedman #1's target spreads about 5 around its mean: a constant predictor's RMSE.
    CHECK(summary["ensemble"]["ensemble_rmse"].get<double>() < 2.5);
    CHECK(summary["members"].size() == 3);
  }

  const PredictedCsv predicted =
      PredictCsv(tmp, state, "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5\n");
  CHECK(predicted.header == "row,mean,std");
  CHECK(predicted.rows.size() == 1);

  auto exported = Run({BinaryPath("ensemblectl"), "export", "-s", state, "-o", tmp / "ensemble.pt"}, tmp.path());
  INFO(exported.out << exported.err);
  CHECK(exported.code == 0);
  auto called = Run({ENS_PYTHON, "-c",
                     "import sys, torch; m = torch.jit.load(sys.argv[1]); mean, std = m(torch.rand(4, 10)); "
                     "assert mean.shape == (4,) and std.shape == (4,), (mean.shape, std.shape)",
                     tmp / "ensemble.pt"},
                    tmp.path());
  INFO(called.out << called.err);
  CHECK(called.code == 0);

  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", state, "--round", "1"}, tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
}

}  // namespace
}  // namespace ens
