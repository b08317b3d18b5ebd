// examples/keras_member.py (the seed question's Keras style) as command members of a run,
// next to a built-in member. Needs TensorFlow: it runs with the benchmark venv's Python
// (bench/setup_baselines.sh; $BENCH_VENV, default ~/.cache/ensembled/bench-venv) and says
// SKIPPED, through ctest's skip code, where that venv or TensorFlow is missing.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

std::string BenchPython() {
  const char* venv = std::getenv("BENCH_VENV");
  const char* home = std::getenv("HOME");
  if (venv) return std::string(venv) + "/bin/python";
  return std::string(home ? home : "/root") + "/.cache/ensembled/bench-venv/bin/python";
}

TEST_CASE("keras command members train in a run and predict through predict_argv") {
  TempDir tmp;
  const std::string py = BenchPython();
  if (!std::filesystem::exists(py) || Run({py, "-c", "import tensorflow, numpy"}, tmp.path()).code != 0) {
    std::fprintf(stderr, "SKIPPED: no TensorFlow at %s (bench/setup_baselines.sh installs it)\n", py.c_str());
    std::_Exit(77);
  }
  const std::string script = std::string(ENS_SOURCE_DIR) + "/examples/keras_member.py";
  const std::string model = R"({"kind": "command", "argv": [")" + py + R"(", ")" + script +
                            R"(", "--epochs", "25"], "predict_argv": [")" + py + R"(", ")" + script + R"(", "predict"]})";
  WriteText(tmp / "run.json", R"({"run_name": "keras", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 150, "pool_rows": 40, "holdout_rows": 200}},
    "members": {"defaults": {"epochs": 30, "layers": [{"units": 16}]},
                "list": [{"name": "keras0", "model": )" + model + R"(}, {"name": "keras1", "model": )" + model +
                              R"(}, {"name": "mlp0"}]},
    "rounds": {"count": 1}})");
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  RunLayout layout(tmp / "state");
  for (const char* name : {"keras0", "keras1"}) {
    INFO(name);
    const std::string dir = layout.MemberDir(0, name);
    CHECK(std::filesystem::exists(dir + "/model/model.keras"));
    const auto metrics = nlohmann::json::parse(ReadText(dir + "/metrics.json"));
    CHECK(metrics["command"].contains("tensorflow"));
    CHECK(metrics["holdout_rmse"].get<double>() < 4.0);  // the targets' own spread is about 5
  }
  WriteText(tmp / "in.csv", "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.0\n");
  auto predict = Run({BinaryPath("ensemblectl"), "predict", "-s", tmp / "state", "-i", tmp / "in.csv"}, tmp.path());
  INFO(predict.out << predict.err);
  CHECK(predict.code == 0);
  CHECK_THAT(predict.out, Catch::StartsWith("row,mean,std\n0,"));
}

}  // namespace
}  // namespace ens
