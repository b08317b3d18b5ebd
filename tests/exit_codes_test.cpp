// Tests of ExitCodeFor (common/base/exit_codes.h), the one place a failure becomes an exit code, and
// of one path through it end to end: a mutation command that runs out of time is transient
// (exit 1, so systemd restarts and the run resumes), not permanent.
#include "common/base/exit_codes.h"

#include <catch2/catch.hpp>

#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using namespace ens::testing;

TEST_CASE("each Status code maps to its exit code", "[exit_codes]") {
  CHECK(ExitCodeFor(Status::Ok()) == 0);
  CHECK(ExitCodeFor(Status::IOError("disk")) == exit_code::kTransientFailure);
  CHECK(ExitCodeFor(Status::Timeout("slow")) == exit_code::kTransientFailure);
  CHECK(ExitCodeFor(Status::Internal("bug")) == exit_code::kTransientFailure);
  CHECK(ExitCodeFor(Status::Cancelled("stop")) == exit_code::kTransientFailure);
  CHECK(ExitCodeFor(Status::InvalidArgument("config")) == exit_code::kPermanentFailure);
  CHECK(ExitCodeFor(Status::NotFound("file")) == exit_code::kPermanentFailure);
  CHECK(ExitCodeFor(Status::Corruption("journal")) == exit_code::kPermanentFailure);
}

TEST_CASE("a mutation command that times out exits 1 (transient) and the run resumes after", "[exit_codes]") {
  TempDir tmp;
  WriteText(tmp / "slow.sh", "#!/bin/sh\nsleep 30\n");
  REQUIRE(::chmod((tmp / "slow.sh").c_str(), 0755) == 0);
  WriteText(tmp / "c.json", R"({"run_name": "slowmut", "state_dir": ")" + (tmp / "s") + R"(", "run_seed": 2,
    "resources": {"gpus": "none", "cpu_workers": 2},
    "data": {"synthetic": {"initial_rows": 100, "pool_rows": 20, "holdout_rows": 20}},
    "members": {"defaults": {"epochs": 1, "layers": [{"units": 4}]}, "count": 2}, "rounds": {"count": 2},
    "mutation": {"policy": "command", "argv": [")" + (tmp / "slow.sh") + R"("], "timeout_s": 1}})");
  auto run = RunEnsembled(tmp / "c.json", tmp.path(), {}, 120);
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  CHECK(run.code == exit_code::kTransientFailure);
  CHECK(run.err.find("did not finish within") != std::string::npos);
  // Round 0's members are kept: a second attempt (a faster command) goes on from there.
  WriteText(tmp / "slow.sh", "#!/bin/sh\necho '{\"add\": [], \"drop\": []}'\n");
  auto again = RunEnsembled(tmp / "c.json", tmp.path(), {}, 120);
  INFO(again.out << again.err);
  CHECK(again.code == 0);
  CHECK(again.err.find("resuming") != std::string::npos);
}

}  // namespace
}  // namespace ens
