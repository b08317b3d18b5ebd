// Restart budget (orchestrator/workers/worker_pool.h, kSlotStartBudget): a worker that dies before it
// is ready, again and again, stops the run with exit 78 and a message that names the cause,
// instead of being respawned every second forever. A worker binary that cannot be executed at
// all is known at the first start (common/subprocess reports the exec failure) and stops the run
// at once; one that exits 1 at once spends the budget.
#include <catch2/catch.hpp>

#include "orchestrator/workers/worker_pool.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using namespace ens::testing;

std::string Config(const std::string& state_dir) {
  return R"({"run_name": "budget", "state_dir": ")" + state_dir + R"(", "run_seed": 1,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 100, "pool_rows": 20, "holdout_rows": 20}},
    "members": {"defaults": {"epochs": 1, "layers": [{"units": 4}]}, "count": 2}, "rounds": {"count": 1}})";
}

TEST_CASE("a worker binary that cannot be executed stops the run with exit 78 naming it", "[restart_budget]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "s"));
  const std::string missing = tmp / "no-such-ensemble-worker";
  auto run = RunWithEnv({BinaryPath("ensembled"), "run", "--config", tmp / "c.json", "--worker", missing},
                        tmp.path(), {}, 120);
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  CHECK(run.code == 78);
  CHECK(run.err.find("its worker cannot be started") != std::string::npos);
  CHECK(run.err.find("cannot execute '" + missing + "'") != std::string::npos);
  // Hopeless from the first start: not respawned at all.
  CHECK(run.seconds < 10.0);
}

TEST_CASE("a worker that exits at once, every time, stops the run with exit 78", "[restart_budget]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "s"));
  auto run = RunWithEnv({BinaryPath("ensembled"), "run", "--config", tmp / "c.json", "--worker", "/bin/false"},
                        tmp.path(), {}, 120);
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  CHECK(run.code == 78);
  CHECK(run.err.find("failed to start " + std::to_string(kSlotStartBudget) + " times in a row") != std::string::npos);
  CHECK(run.err.find("exited with 1") != std::string::npos);
}

}  // namespace
}  // namespace ens
