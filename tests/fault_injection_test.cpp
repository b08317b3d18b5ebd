// Tests of common/fault_injection: a test's own Faults replaces the environment's in-process
// (the interface product code asks through), and the journal-write fault end to end: a run whose
// finished members cannot be journaled exits with the transient code (systemd restarts it),
// says whose results are not recorded, and the next run completes the round.
#include "common/base/fault_injection.h"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/base/exit_codes.h"
#include "common/state/journal.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

// Fails what it is told to; answers "no" to everything else.
class FakeFaults final : public Faults {
 public:
  std::string failing_event;
  int slow_ms = 0;
  bool CrashAt(const char*, int) override { return false; }
  bool NonFiniteLoss(const std::string& task_id) override { return task_id == "r0-m1"; }
  bool WriteFailure(const std::string&, int) override { return false; }
  bool OutOfMemory(size_t pack_size) override { return pack_size > 4; }
  bool KillForSize(size_t) override { return false; }
  bool TorchError(const std::string&) override { return false; }
  int SlowPhaseMs(std::string_view) override { return slow_ms; }
  bool Hang(const std::string&, int, std::string_view) override { return false; }
  std::vector<std::string> RawMessages(const std::string&, int, int, long) override { return {}; }
  bool JournalWriteFails(const std::string& event) override { return event == failing_event; }
  std::optional<std::string> CudaSees() override { return std::string("none"); }
};

TEST_CASE("fault injection: an installed Faults answers instead of the environment, until it goes", "[fault_injection]") {
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
  ::unsetenv("ENSEMBLED_TEST_CUDA_SEES");
  CHECK_FALSE(OutOfMemoryRequested(100));
  CHECK_FALSE(CudaSeesRequested().has_value());
  {
    FakeFaults fake;
    ScopedFaults installed(&fake);
    CHECK(OutOfMemoryRequested(5));
    CHECK_FALSE(OutOfMemoryRequested(4));
    CHECK(NonFiniteLossRequested("r0-m1"));
    CHECK(CudaSeesRequested() == std::optional<std::string>("none"));
  }
  CHECK_FALSE(OutOfMemoryRequested(100));
  CHECK_FALSE(NonFiniteLossRequested("r0-m1"));
  ::setenv("ENSEMBLED_TEST_OOM_ABOVE", "2", 1);  // the environment's, as a child process sees it
  CHECK(OutOfMemoryRequested(3));
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
}

TEST_CASE("fault injection: a journal write holding the failing event fails whole, and nothing of it is kept", "[fault_injection]") {
  TempDir dir;
  auto j = Journal::Open(dir.File("journal.jsonl"));
  REQUIRE(j.ok());
  FakeFaults fake;
  fake.failing_event = "member_done";
  ScopedFaults installed(&fake);
  REQUIRE((*j)->Append(RunStartedRecord{"fp", 3, 10, 5, 5}).ok());
  Status s = (*j)->AppendBatch({ToRecord(MemberFailedRecord{0, "m0", 0, 1, "x", true}),
                                ToRecord(MemberDoneRecord{0, "m1", 1, 1, 0, 7, json::object()})});
  CHECK(s.code() == Status::Code::kIOError);
  CHECK(s.message().find("journal.jsonl") != std::string::npos);
  CHECK((*j)->records().empty());  // what Open read; the appended records are on disk
  auto reread = ReadJournal(dir.File("journal.jsonl"));
  REQUIRE(reread.ok());
  CHECK(reread->size() == 1);
}

std::string Config(const std::string& state_dir) {
  return R"({"run_name": "journalfail", "state_dir": ")" + state_dir + R"(", "run_seed": 13,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 100, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 2, "batch_size": 32, "layers": [{"units": 8}]}, "count": 2},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "pack_size": 1,
    "rounds": {"count": 1}})";
}

int Count(const std::vector<json>& recs, const std::string& event) {
  int n = 0;
  for (const auto& r : recs) n += r.value("event", "") == event;
  return n;
}

TEST_CASE("a run whose finished members cannot be journaled exits 1 saying they are not recorded, and resumes", "[fault_injection][resilience]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "state"));
  TimedRun failed = RunEnsembled(tmp / "c.json", tmp.path(), {{{"ENSEMBLED_TEST_FAIL_JOURNAL", "member_done"}}, {}}, 120);
  INFO(failed.out + failed.err);
  REQUIRE_FALSE(failed.timed_out);
  CHECK(failed.code == exit_code::kTransientFailure);  // systemd restarts it (Restart=on-failure)
  const std::string said = failed.out + failed.err;
  CHECK(said.find("round 0: cannot journal ") != std::string::npos);  // 1 or 2: as their reports came
  CHECK(said.find(" finished member(s) (write ") != std::string::npos);
  CHECK(said.find("their results are not recorded: the resumed run trains them again") != std::string::npos);
  CHECK(Count(JournalOf(tmp / "state"), "member_done") == 0);

  TimedRun resumed = RunEnsembled(tmp / "c.json", tmp.path(), {{}, {"ENSEMBLED_TEST_FAIL_JOURNAL"}}, 120);
  INFO(resumed.out + resumed.err);
  CHECK(resumed.code == 0);
  const auto recs = JournalOf(tmp / "state");
  CHECK(Count(recs, "member_done") == 2);
  CHECK(Count(recs, "round_committed") == 1);
  CHECK(Count(recs, "run_finished") == 1);
}

}  // namespace
}  // namespace ens
