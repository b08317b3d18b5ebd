// Tests of ensemblectl's subcommands (ctl/main.cpp): they come from the control protocol's
// table (common/ipc/control_protocol.h), each with its row's help, and a kAction row is a
// working subcommand with no code of its own in ctl/.
#include <catch2/catch.hpp>

#include "common/base/exit_codes.h"
#include "common/ipc/control_protocol.h"
#include "support/process_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;

TEST_CASE("ensemblectl --help lists every command of the table that has a subcommand, with its help",
          "[ctl][control]") {
  TempDir tmp;
  RunResult help = Run({BinaryPath("ensemblectl"), "--help"}, tmp.path());
  REQUIRE(help.code == 0);
  for (const ControlCommandInfo& row : kControlCommands) {
    INFO(row.name);
    const bool listed = help.out.find(std::string(row.name) + " ") != std::string::npos;
    CHECK(listed == (row.ctl != CtlForm::kNoCommand));
    if (row.ctl != CtlForm::kNoCommand) CHECK(help.out.find(row.what) != std::string::npos);
  }
}

TEST_CASE("a kAction subcommand asks the run's socket and names it when nothing answers", "[ctl][control]") {
  TempDir tmp;
  for (const ControlCommandInfo& row : kControlCommands) {
    if (row.ctl != CtlForm::kAction) continue;
    INFO(row.name);
    RunResult r = Run({BinaryPath("ensemblectl"), row.name, "--state-dir", tmp.path()}, tmp.path());
    CHECK(r.code == exit_code::kTransientFailure);
    CHECK(r.err.find(std::string("ensemblectl ") + row.name + ": ") != std::string::npos);
    CHECK(r.err.find(tmp.path() + "/control.sock") != std::string::npos);
    // Neither a state directory nor a served run: a usage error naming the command.
    RunResult bare = Run({BinaryPath("ensemblectl"), row.name}, tmp.path());
    CHECK(bare.code == exit_code::kUsage);
    CHECK(bare.err.find(std::string("ensemblectl ") + row.name + ": give the run's --state-dir") != std::string::npos);
  }
}

}  // namespace
}  // namespace ens
