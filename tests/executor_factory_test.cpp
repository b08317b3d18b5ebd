// SetUpExecutor: each executor kind gets its executor, transport and worker slots; a caller
// that injects its own executor gets the slots only; the local planner's refusal reaches the
// caller as it was.
#include <catch2/catch.hpp>

#include "orchestrator/workers/executor_factory.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;

ExecutorContext Context(const Config* cfg, const std::string& root, bool slots_only, int* planned) {
  return {cfg, "run-1", root, slots_only, [planned]() -> StatusOr<std::vector<WorkerPlacement>> {
            ++*planned;
            return std::vector<WorkerPlacement>{{0, "GPU-a"}, {1, "GPU-b"}};
          }};
}

TEST_CASE("the local executor takes the planned slots and forks workers over socket pairs", "[executor_factory]") {
  TempDir dir;
  Config cfg;
  int planned = 0;
  auto setup = SetUpExecutor(Context(&cfg, dir.path(), false, &planned));
  REQUIRE(setup.ok());
  CHECK(planned == 1);
  REQUIRE(setup->placements.size() == 2);
  CHECK(setup->placements[1].gpu == "GPU-b");
  REQUIRE(setup->executor != nullptr);
  CHECK(setup->executor->name() == "local");
  CHECK_FALSE(setup->executor->remote());
  CHECK(setup->transport != nullptr);

  auto slots = SetUpExecutor(Context(&cfg, dir.path(), true, &planned));
  REQUIRE(slots.ok());
  CHECK(planned == 2);
  CHECK(slots->placements.size() == 2);
  CHECK(slots->executor == nullptr);
  CHECK(slots->transport == nullptr);
}

TEST_CASE("a local plan that cannot be met is the caller's error, unchanged", "[executor_factory]") {
  TempDir dir;
  Config cfg;
  ExecutorContext ctx{&cfg, "run-1", dir.path(), false, [] {
                        return StatusOr<std::vector<WorkerPlacement>>(
                            Status::InvalidArgument("/resources/gpus: 4 GPUs asked; this process may use 1"));
                      }};
  auto setup = SetUpExecutor(ctx);
  REQUIRE_FALSE(setup.ok());
  CHECK(setup.status().code() == Status::Code::kInvalidArgument);
  CHECK(setup.status().message() == "/resources/gpus: 4 GPUs asked; this process may use 1");
}

TEST_CASE("the slurm executor has one slot a pilot job, Slurm choosing the GPUs, and never asks the local plan",
          "[executor_factory]") {
  TempDir dir;
  Config cfg;
  cfg.resources.executor = ExecutorKind::kSlurm;
  cfg.resources.slurm.workers = 3;
  int planned = 0;
  auto slots = SetUpExecutor(Context(&cfg, dir.path(), true, &planned));
  REQUIRE(slots.ok());
  CHECK(planned == 0);
  REQUIRE(slots->placements.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(slots->placements[i].slot == i);
    CHECK(slots->placements[i].gpu.empty());
  }
  CHECK(slots->executor == nullptr);

  cfg.resources.slurm.listen = "127.0.0.1";
  cfg.resources.slurm.advertise_host = "127.0.0.1";
  auto setup = SetUpExecutor(Context(&cfg, dir.path(), false, &planned));
  REQUIRE(setup.ok());
  CHECK(planned == 0);
  REQUIRE(setup->executor != nullptr);
  CHECK(setup->executor->name() == "slurm");
  CHECK(setup->executor->remote());
  REQUIRE(setup->transport != nullptr);
}

}  // namespace
}  // namespace ens
