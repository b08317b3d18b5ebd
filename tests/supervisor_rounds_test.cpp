// The supervisor's round logic in-process: a Supervisor with an injected FakeExecutor
// (tests/support/fake_executor.h) whose thread "workers" speak the real protocol over real
// socket pairs. No worker binary, no libtorch: dispatch, retries, lost workers, permanent
// failures, the restart budget and hopeless starts, with every record checked in the journal.
#include <signal.h>

#include <algorithm>
#include <string>

#include <catch2/catch.hpp>

#include "common/config/config.h"
#include "common/base/exit_codes.h"
#include "orchestrator/run/supervisor.h"
#include "orchestrator/workers/transport.h"
#include "support/env_spawn.h"
#include "support/fake_executor.h"
#include "support/temp_dir.h"

#include "common/base/atomic_file.h"
#include "common/state/journal.h"
#include "common/state/run_layout.h"

namespace ens {
namespace {

using namespace ens::testing;
using Act = FakeExecutor::Act;

const bool kSigpipeIgnored = ::signal(SIGPIPE, SIG_IGN) != SIG_ERR;  // as ensembled's main()

constexpr int kHoldout = 40, kPool = 60;

Config MakeConfig(const std::string& state, int members, int rounds, const std::string& extra = "",
                  int workers = 2) {
  const std::string text = R"({"run_name": "fake", "state_dir": ")" + state + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(workers) + R"(},
    "data": {"synthetic": {"initial_rows": 50, "pool_rows": )" + std::to_string(kPool) +
                           R"(, "holdout_rows": )" + std::to_string(kHoldout) + R"(}},
    "members": {"defaults": {"layers": [{"units": 4}]}, "count": )" + std::to_string(members) + R"(},
    "mutation": {"policy": "query_by_committee", "k": 5},
    "max_task_attempts": 3, "pack_size": 1)" + extra + R"(,
    "rounds": {"count": )" + std::to_string(rounds) + "}}";
  auto c = ParseConfig(text, "test", "/");
  INFO(c.status().message());
  REQUIRE(c.ok());
  return *c;
}

// 2 members, 3 rounds, mutated by `python3 script` (policy command).
Config CommandMutationConfig(const std::string& state, const std::string& script) {
  Config cfg = MakeConfig(state, 2, 3);
  cfg.mutation.policy = MutationPolicyKind::kCommand;
  cfg.mutation.argv = {"/usr/bin/python3", script};
  return cfg;
}

int RunWith(FakeExecutor& fake, const Config& cfg) {
  LocalTransport transport;
  SupervisorOptions o;
  o.worker_binary = "/fake/ensemble-worker";  // never executed: the fake starts threads
  o.executor = &fake;
  o.transport = &transport;
  Supervisor s(cfg, o);
  return s.Run();
}

int Count(const std::vector<nlohmann::json>& recs, const std::string& event, const std::string& member, int attempt) {
  int n = 0;
  for (const auto& r : recs)
    n += r.value("event", "") == event && r.value("member", "") == member && r.value("attempt", 0) == attempt;
  return n;
}

TEST_CASE("rounds run to the end on fake workers, every member done once per round") {
  TempDir dir;
  FakeExecutor fake(kHoldout, kPool);
  REQUIRE(RunWith(fake, MakeConfig(dir.path() + "/s", 5, 2)) == exit_code::kOk);
  auto recs = JournalOf(dir.path() + "/s");
  CHECK(CountEvents(recs, "member_done") == 10);
  CHECK(CountEvents(recs, "round_committed") == 2);
  CHECK(CountEvents(recs, "run_finished") == 1);
  CHECK(fake.tasks_seen() == 10);
  CHECK(fake.starts() == 2);  // two workers, never replaced
  for (const auto& [key, n] : DoneCounts(recs)) CHECK(n == 1);
}

TEST_CASE("a worker that dies in a task is replaced and its member retried as the next attempt") {
  TempDir dir;
  FakeExecutor fake(kHoldout, kPool);
  fake.Script("m001", 1, Act::kDie);
  fake.Script("m003", 1, Act::kDie);
  fake.Script("m003", 2, Act::kDie);
  // One worker: every death must be replaced before the round can go on.
  REQUIRE(RunWith(fake, MakeConfig(dir.path() + "/s", 4, 1, "", 1)) == exit_code::kOk);
  auto recs = JournalOf(dir.path() + "/s");
  CHECK(Count(recs, "member_done", "m001", 2) == 1);
  CHECK(Count(recs, "member_done", "m003", 3) == 1);
  CHECK(CountEvents(recs, "member_done") == 4);
  CHECK(fake.deaths() == 3);
  CHECK(fake.starts() == 1 + 3);  // each death replaced
}

TEST_CASE("transient failures are retried up to max_task_attempts, permanent ones are not") {
  TempDir dir;
  FakeExecutor fake(kHoldout, kPool);
  fake.Script("m000", 1, Act::kFail);
  fake.Script("m000", 2, Act::kFail);
  fake.Script("m002", 1, Act::kFailPermanent);
  // min_members 3 of 4: the round commits without m002.
  REQUIRE(RunWith(fake, MakeConfig(dir.path() + "/s", 4, 1, R"(, "min_members": 3)")) == exit_code::kOk);
  auto recs = JournalOf(dir.path() + "/s");
  CHECK(Count(recs, "member_done", "m000", 3) == 1);
  CHECK(Count(recs, "member_failed", "m002", 1) == 1);
  CHECK(Count(recs, "member_done", "m002", 2) == 0);  // not retried
  CHECK(CountEvents(recs, "round_committed") == 1);
}

TEST_CASE("a member failing every attempt fails the round and nothing is committed") {
  TempDir dir;
  FakeExecutor fake(kHoldout, kPool);
  for (int a = 1; a <= 3; ++a) fake.Script("m001", a, Act::kFail);
  CHECK(RunWith(fake, MakeConfig(dir.path() + "/s", 3, 1)) != exit_code::kOk);
  auto recs = JournalOf(dir.path() + "/s");
  CHECK(Count(recs, "member_failed", "m001", 3) == 1);
  CHECK(CountEvents(recs, "round_committed") == 0);
}

TEST_CASE("starts that keep failing exhaust the restart budget, a hopeless start stops at once, both exit 78") {
  {
    TempDir dir;
    FakeExecutor fake(kHoldout, kPool);
    fake.failing_starts = 1000;
    CHECK(RunWith(fake, MakeConfig(dir.path() + "/s", 2, 1)) == exit_code::kPermanentFailure);
    CHECK(fake.starts() >= kSlotStartBudget);
    CHECK(fake.starts() <= 2 * kSlotStartBudget);
  }
  {
    TempDir dir;
    FakeExecutor fake(kHoldout, kPool);
    fake.hopeless_start = true;
    CHECK(RunWith(fake, MakeConfig(dir.path() + "/s", 2, 1)) == exit_code::kPermanentFailure);
    CHECK(fake.starts() <= 2);  // one per slot, never retried
  }
}

TEST_CASE("rows a mutation drops are not counted as training rows, and a row dropped twice counts once") {
  TempDir dir;
  // Adds 20 rows and drops 5 new ones each round; from round 1 on it also drops row 0 again.
  const std::string script = dir.path() + "/mutate.py";
  REQUIRE(WriteFileAtomic(script, R"(import json, sys
r = json.load(sys.stdin)["round"]
drop = list(range(5 * r, 5 * r + 5)) + ([0] if r else [])
print(json.dumps({"add": [[0.5] * 10 + [1.0]] * 20, "drop": drop}))
)").ok());
  FakeExecutor fake(kHoldout, kPool);
  const std::string state = dir.path() + "/s";
  Config cfg = CommandMutationConfig(state, script);
  REQUIRE(RunWith(fake, cfg) == exit_code::kOk);
  auto recs = JournalOf(state);
  std::vector<uint64_t> trained, dropped_rows;
  for (const auto& r : recs)
    if (r.value("event", "") == "round_committed") {
      trained.push_back(r.value("trained_rows", uint64_t{0}));
      dropped_rows.push_back(r.value("dropped_rows", uint64_t{0}));
    }
  // 50 -> +20 -5 -> 65 -> +20 -(5 new + row 0 again) -> 80; the last round decides no mutation.
  CHECK(trained == std::vector<uint64_t>{50, 65, 80});
  CHECK(dropped_rows == std::vector<uint64_t>{5, 10, 10});
  const RunProgress p = ReplayJournal(recs);
  CHECK(p.train_rows == 90);  // the table holds every row ever added
  CHECK(p.training_rows() == 80);
  RunLayout layout(state);
  for (int r = 0; r < 3; ++r) {
    auto text = ReadFile(layout.SummaryFile(r));
    REQUIRE(text.ok());
    auto summary = nlohmann::json::parse(*text);
    CHECK(summary["train_rows"] == 50 + 15 * r);
    if (r < 2) CHECK(summary["mutation"]["dropped"] == 5);  // round 1's repeat of row 0 is not new
  }
}


// The ids of an int64 .npy file (the mutation view's pool_unused_ids.npy), without numpy.
constexpr const char* kReadNpyIds = R"(
def npy_ids(path):
    import struct
    b = open(path, "rb").read()
    n = struct.unpack("<H", b[8:10])[0]
    body = b[10 + n:]
    return [struct.unpack("<q", body[i:i + 8])[0] for i in range(0, len(body), 8)]
)";

TEST_CASE("a mutation command takes pool rows: they leave the pool, train with their labels, and are journaled") {
  TempDir dir;
  // Round 0 takes pool rows 3, 7 and 11; round 1 records what the pool has left and takes 0.
  const std::string script = dir.path() + "/take.py";
  REQUIRE(WriteFileAtomic(script, std::string("import json, sys\n") + kReadNpyIds + R"(
s = json.load(sys.stdin)
if s["round"] == 1:
    open(")" + dir.path() + R"(/unused.json", "w").write(json.dumps(npy_ids(s["run"]["pool_unused_ids"])))
print(json.dumps({"take": [3, 7, 11] if s["round"] == 0 else [0]}))
)").ok());
  FakeExecutor fake(kHoldout, kPool);
  const std::string state = dir.path() + "/s";
  Config cfg = CommandMutationConfig(state, script);
  REQUIRE(RunWith(fake, cfg) == exit_code::kOk);
  auto recs = JournalOf(state);
  std::vector<uint64_t> trained;
  std::vector<nlohmann::json> taken;
  for (const auto& r : recs) {
    if (r.value("event", "") == "round_committed") trained.push_back(r.value("trained_rows", uint64_t{0}));
    if (r.contains("pool_used")) taken.push_back(r["pool_used"]);
  }
  CHECK(trained == std::vector<uint64_t>{50, 53, 54});
  REQUIRE(taken.size() >= 2);
  CHECK(taken[0] == nlohmann::json{3, 7, 11});
  CHECK(taken[1] == nlohmann::json{0});
  const RunProgress p = ReplayJournal(recs);
  CHECK(p.pool_used.size() == 4);
  // Round 1's view of the pool: every row but the three taken.
  auto unused = ReadFile(dir.path() + "/unused.json");
  REQUIRE(unused.ok());
  std::vector<int64_t> left = nlohmann::json::parse(*unused).get<std::vector<int64_t>>();
  CHECK(left.size() == kPool - 3);
  for (int64_t id : {3, 7, 11}) CHECK(std::find(left.begin(), left.end(), id) == left.end());
}

TEST_CASE("a mutation command that takes a pool row already in training fails the run and records nothing of it") {
  TempDir dir;
  const std::string script = dir.path() + "/again.py";
  REQUIRE(WriteFileAtomic(script, "import json, sys\njson.load(sys.stdin)\nprint(json.dumps({\"take\": [3]}))\n").ok());
  FakeExecutor fake(kHoldout, kPool);
  const std::string state = dir.path() + "/s";
  Config cfg = CommandMutationConfig(state, script);
  CHECK(RunWith(fake, cfg) == exit_code::kPermanentFailure);
  // Round 0's take is recorded; round 1's is refused and nothing of it is.
  CHECK(ReplayJournal(JournalOf(state)).pool_used == std::vector<uint64_t>{3});
}

}  // namespace
}  // namespace ens
