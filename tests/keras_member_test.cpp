// examples/keras_member.py (the seed question's Keras style: a Keras model per seed, trained by
// model.fit in a process of its own) as command members of a run, next to a built-in member:
// Keras 3 on the torch backend, from the project's venv (scripts/setup installs it). They train,
// predict through predict_argv, and a Keras member trained alone (the same seed through
// seed_offset) is the member it was in the loop: the same holdout RMSE and best val_loss to the
// last bit. SKIPPED through ctest's skip code where the venv has no Keras.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

// The model of a Keras command member.
std::string KerasModel(const std::string& py) {
  const std::string script = std::string(ENS_SOURCE_DIR) + "/examples/keras_member.py";
  return R"({"kind": "command", "argv": [")" + py + R"(", ")" + script + R"(", "--epochs", "25"], "predict_argv": [")" +
         py + R"(", ")" + script + R"(", "predict"]})";
}

std::string RunConfig(const std::string& state_dir, const std::string& members) {
  return R"({"run_name": "keras", "state_dir": ")" + state_dir + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 150, "pool_rows": 40, "holdout_rows": 200}},
    "members": {"defaults": {"epochs": 30, "layers": [{"units": 16}]}, "list": [)" + members + R"(]},
    "rounds": {"count": 1}})";
}

json MetricsOf(const std::string& state_dir, const std::string& member) {
  return json::parse(ReadText(RunLayout(state_dir).MemberDir(0, member) + "/metrics.json"), nullptr, false);
}

TEST_CASE("keras command members train in a run and predict through predict_argv - alone as in the loop") {
  TempDir tmp;
  const std::string py = ENS_PYTHON;
  if (Run({py, "-c", "import os; os.environ.setdefault('KERAS_BACKEND', 'torch'); import keras, numpy"}, tmp.path()).code != 0) {
    std::fprintf(stderr, "SKIPPED: no Keras in %s (scripts/setup installs it)\n", py.c_str());
    std::_Exit(77);
  }
  const std::string model = KerasModel(py);
  WriteText(tmp / "run.json", RunConfig(tmp / "state", R"({"name": "keras0", "model": )" + model +
                                                           R"(}, {"name": "keras1", "model": )" + model +
                                                           R"(}, {"name": "mlp0"})"));
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  RunLayout layout(tmp / "state");
  for (const char* name : {"keras0", "keras1"}) {
    INFO(name);
    CHECK(std::filesystem::exists(layout.MemberDir(0, name) + "/model/model.keras"));
    const json metrics = MetricsOf(tmp / "state", name);
    REQUIRE(metrics.is_object());
    CHECK(metrics["command"].value("backend", "") == "torch");
    CHECK(metrics["command"].contains("keras"));
    CHECK(metrics["holdout_rmse"].get<double>() < 4.0);  // the targets' own spread is about 5
  }
  WriteText(tmp / "in.csv", "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9\n0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9,0.0\n");
  auto predict = Run({BinaryPath("ensemblectl"), "predict", "-s", tmp / "state", "-i", tmp / "in.csv"}, tmp.path());
  INFO(predict.out << predict.err);
  CHECK(predict.code == 0);
  CHECK_THAT(predict.out, Catch::StartsWith("row,mean,std\n0,"));

  // keras1 alone: the first and only member, with seed_offset 1 the seed it had as the second.
  WriteText(tmp / "alone.json",
            RunConfig(tmp / "alone", R"({"name": "keras1", "seed_offset": 1, "model": )" + model + "}"));
  auto alone = RunEnsembled(tmp / "alone.json", tmp.path(), {}, 600);
  INFO(alone.out << alone.err);
  REQUIRE(alone.code == 0);
  const json in_loop = MetricsOf(tmp / "state", "keras1"), by_itself = MetricsOf(tmp / "alone", "keras1");
  REQUIRE(by_itself.is_object());
  INFO("in the loop " << in_loop.dump() << "\nalone " << by_itself.dump());
  CHECK(in_loop["holdout_rmse"].get<double>() == by_itself["holdout_rmse"].get<double>());
  CHECK(in_loop["command"]["best_val_loss"].get<double>() == by_itself["command"]["best_val_loss"].get<double>());
  // And a different seed gives a different member (the check above is not of a constant).
  CHECK(MetricsOf(tmp / "state", "keras0")["holdout_rmse"].get<double>() != in_loop["holdout_rmse"].get<double>());
}

}  // namespace
}  // namespace ens
