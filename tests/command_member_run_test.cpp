// Command members in a whole run: examples/torch_member.py (the venv's PyTorch) trained by
// ensembled next to built-in members, through rounds, query by committee, a worker killed
// in the middle of a command member, `ensemblectl predict` (through predict_argv) and
// `ensemblectl verify` (the program rerun, its predictions compared).
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/predict_csv.h"
#include "support/process_harness.h"
#include "support/python_imports.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

// Runs examples/torch_member.py, except that the first run of member `torch1` in round 0
// kills the worker that runs it (its parent) and then sleeps: the supervisor must retry it on
// a fresh worker, and nothing of that first run may survive (its child's pid goes to <pidfile>).
constexpr const char* kWrapper = R"PY(
import os, signal, subprocess, sys, time
pidfile, python, script = sys.argv[1], sys.argv[2], sys.argv[3]
e = os.environ
if e["ENSEMBLED_MEMBER"] == "torch1" and e.get("ENSEMBLED_ROUND") == "0" and not os.path.exists(pidfile):
    # A child in the program's group outlives the program's own death with the worker
    # (PR_SET_PDEATHSIG reaches the program only): the daemon must find and kill it.
    child = subprocess.Popen(["/bin/sleep", "1000"])
    with open(pidfile, "w") as f:
        f.write(str(child.pid))
    os.kill(os.getppid(), signal.SIGKILL)
    time.sleep(1000)
os.execv(python, [python, script] + sys.argv[4:])
)PY";

TEST_CASE("torch command members train next to built-in ones, survive a killed worker, predict and verify") {
  SkipUnlessPythonImports(ENS_PYTHON, "torch, numpy");
  TempDir tmp;
  const std::string example = std::string(ENS_SOURCE_DIR) + "/examples/torch_member.py";
  WriteText(tmp / "wrapper.py", kWrapper);
  const std::string py = ENS_PYTHON;
  auto argv = [&](const std::string& extra) {
    return "[\"" + py + "\", \"" + (tmp / "wrapper.py") + "\", \"" + (tmp / "attempt1.pid") + "\", \"" + py +
           "\", \"" + example + "\"" + extra + "]";
  };
  const std::string command = R"({"kind": "command", "argv": )" + argv(R"(, "--epochs", "40")") +
                              R"(, "predict_argv": )" + argv(R"(, "predict")") + R"(, "timeout_s": 300})";
  WriteText(tmp / "run.json", R"({"run_name": "cmd", "state_dir": ")" + tmp / "state" + R"(", "run_seed": 3,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 150, "pool_rows": 300, "holdout_rows": 300}},
    "members": {"defaults": {"epochs": 40, "layers": [{"units": 16}]},
                "list": [{"name": "torch0", "model": )" + command + R"(},
                         {"name": "torch1", "model": )" + command + R"(},
                         {"name": "mlp0"}, {"name": "mlp1"}]},
    "mutation": {"policy": "query_by_committee", "k": 25},
    "heartbeat_timeout_s": 60,
    "rounds": {"count": 2}})");
  auto run = RunEnsembled(tmp / "run.json", tmp.path(), {}, 600);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  const std::string state = tmp / "state";
  auto recs = JournalOf(state);
  CHECK(CountEvents(recs, "round_committed") == 2);

  // The worker killed mid-command: torch1 of round 0 was retried, and attempt 1's program
  // (a sleeping child of the dead worker, in a process group of its own) is gone.
  int torch1_attempts = 0;
  for (const auto& r : recs)
    if (r.value("event", "") == "member_done" && r.value("member", "") == "torch1" && r.value("round", -1) == 0)
      torch1_attempts = r.value("attempt", 0);
  CHECK(torch1_attempts == 2);
  pid_t attempt1 = 0;
  std::ifstream(tmp / "attempt1.pid") >> attempt1;
  REQUIRE(attempt1 > 0);
  CHECK_FALSE(IsLive(attempt1));

  // Every member is in the round's ensemble; the torch members learned something.
  RunLayout layout(state);
  const auto summary = nlohmann::json::parse(ReadText(layout.SummaryFile(1)));
  REQUIRE(summary["members"].size() == 4);
  CHECK(summary["train_rows"] == 175);
  for (const char* name : {"torch0", "torch1"}) {
    const std::string dir = layout.MemberDir(1, name);
    INFO(name);
    CHECK(std::filesystem::exists(dir + "/model/model.pt"));
    CHECK(std::filesystem::exists(dir + "/command.log"));
    CHECK_FALSE(std::filesystem::exists(dir + "/input"));
    const auto metrics = nlohmann::json::parse(ReadText(dir + "/metrics.json"));
    CHECK(metrics["device"] == "command");
    CHECK(metrics["command"].contains("torch"));
    CHECK(metrics["epochs_run"] == 40);
    // Friedman #1 targets spread ~5 around their mean: a model that learned nothing scores that.
    CHECK(metrics["holdout_rmse"].get<double>() < 3.5);
  }

  // ensemblectl predict runs torch members through predict_argv and built-in ones through
  // their checkpoints: 4 members, one line per row.
  const auto run_json = nlohmann::json::parse(ReadText(state + "/run.json"));
  std::ostringstream csv;
  const auto names = run_json["feature_names"].get<std::vector<std::string>>();
  for (size_t i = 0; i < names.size(); ++i) csv << (i ? "," : "") << names[i];
  csv << "\n";
  for (int r = 0; r < 5; ++r)
    for (size_t i = 0; i < names.size(); ++i) csv << (i ? "," : "") << 0.1 * (r + 1) << (i + 1 == names.size() ? "\n" : "");
  const PredictedCsv predicted = PredictCsv(tmp, state, csv.str());
  CHECK(predicted.header == "row,mean,std");
  CHECK(predicted.rows.size() == 5);

  // verify reruns the program and finds the same predictions (torch on the CPU, seeded): the
  // retried torch1 of round 0 wrote what an undisturbed run writes.
  auto verify = Run({BinaryPath("ensemblectl"), "verify", "-s", state, "--round", "0", "--member", "torch1"},
                    tmp.path());
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK_THAT(verify.out, Catch::Contains("equal (command member"));
}

}  // namespace
}  // namespace ens
