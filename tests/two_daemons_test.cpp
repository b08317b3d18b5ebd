// Two runs at once: two ensembled daemons with different configs and state dirs do not
// disturb each other (their queues are named by run id); a second ensembled on the SAME
// state dir is refused while the first runs. The state dir is private: 0700 / 0600.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string ConfigA(const std::string& state_dir) {
  return R"({"run_name": "alpha", "state_dir": ")" + state_dir + R"(", "run_seed": 51,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 200, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 40, "batch_size": 16, "layers": [{"units": 24}]}, "count": 4},
    "mutation": {"policy": "append_from_pool", "k": 20},
    "pack_size": 1,  // one member per task
    "rounds": {"count": 2}})";
}

std::string ConfigB(const std::string& state_dir) {
  return R"({"run_name": "beta", "state_dir": ")" + state_dir + R"(", "run_seed": 52,
    "resources": {"gpus": "none", "cpu_workers": 1, "threads_per_worker": 1},
    "data": {"synthetic": {"features": 6, "initial_rows": 250, "pool_rows": 150, "holdout_rows": 80}},
    "members": {"defaults": {"epochs": 40, "batch_size": 8, "layers": [{"units": 12, "activation": "tanh"}]},
                "count": 3},
    "mutation": {"policy": "query_by_committee", "k": 15},
    "pack_size": 1,  // one member per task
    "rounds": {"count": 2}})";
}

int ModeOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  return static_cast<int>(st.st_mode & 07777);
}

TEST_CASE("two daemons on two state dirs run side by side and a second one on the same state dir is refused",
          "[resilience][two_daemons]") {
  ::umask(022);  // a permissive umask, so the modes checked below are the daemon's own choice
  TempDir tmp;
  WriteText(tmp / "a_alone.json", ConfigA(tmp / "a_alone"));
  WriteText(tmp / "b_alone.json", ConfigB(tmp / "b_alone"));
  WriteText(tmp / "a.json", ConfigA(tmp / "a"));
  WriteText(tmp / "b.json", ConfigB(tmp / "b"));

  auto a_alone = RunEnsembled(tmp / "a_alone.json", tmp.path(), {}, 90);
  INFO(a_alone.out << a_alone.err);
  REQUIRE(a_alone.code == 0);
  auto b_alone = RunEnsembled(tmp / "b_alone.json", tmp.path(), {}, 90);
  INFO(b_alone.out << b_alone.err);
  REQUIRE(b_alone.code == 0);

  auto t0 = SteadyClock::now();
  pid_t a = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "a.json"}, tmp / "a.out", tmp / "a.err");
  pid_t b = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "b.json"}, tmp / "b.out", tmp / "b.err");

  // While A runs (its workers are up), a second ensembled on A's state dir.
  bool a_running = false;
  for (int i = 0; i < 3000 && !a_running; ++i) {
    a_running = ChildrenOf(a).size() == 2 && std::filesystem::exists(RunLayout(tmp / "a").StatusFile());
    if (!a_running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(a_running);
  std::string journal_before = ReadText(RunLayout(tmp / "a").JournalFile());
  auto intruder = RunEnsembled(tmp / "a.json", tmp.path(), {}, 30);
  std::optional<int> a_early = TryWait(a);  // A must still be running, or the refusal proves nothing
  CHECK_FALSE(a_early.has_value());
  INFO("second ensembled on the same state dir:\n" << intruder.out << intruder.err);
  CHECK_FALSE(intruder.timed_out);
  CHECK(intruder.code != 0);
  CHECK(intruder.err.find("another ensembled") != std::string::npos);
  CHECK(intruder.seconds < 5);
  // The refused one touched nothing: the journal only grew (A kept appending), never changed.
  std::string journal_now = ReadText(RunLayout(tmp / "a").JournalFile());
  CHECK(journal_now.compare(0, journal_before.size(), journal_before) == 0);

  bool ta = false, tb = false;
  int code_a = a_early ? *a_early : WaitAtMost(a, 120, &ta);
  int code_b = WaitAtMost(b, 120, &tb);
  double both_seconds = SecondsSince(t0);
  INFO("A:\n" << ReadText(tmp / "a.out") << ReadText(tmp / "a.err") << "\nB:\n" << ReadText(tmp / "b.out")
              << ReadText(tmp / "b.err"));
  REQUIRE_FALSE(ta);
  REQUIRE_FALSE(tb);
  CHECK(code_a == 0);
  CHECK(code_b == 0);
  std::printf("[two_daemons] A alone %.1f s, B alone %.1f s, A and B side by side %.1f s; refused intruder exit %d "
              "after %.2f s\n",
              a_alone.seconds, b_alone.seconds, both_seconds, intruder.code, intruder.seconds);
  std::fflush(stdout);

  // Results equal each run alone, bit for bit (every member of both rounds).
  auto da = CompareRuns(tmp / "a_alone", tmp / "a", 2, 4, tmp.path());
  auto db = CompareRuns(tmp / "b_alone", tmp / "b", 2, 3, tmp.path());
  INFO("A: " << Joined(da) << "\nB: " << Joined(db));
  CHECK(da.empty());
  CHECK(db.empty());
  CHECK(CommitFacts(JournalOf(tmp / "a")) == CommitFacts(JournalOf(tmp / "a_alone")));
  CHECK(CommitFacts(JournalOf(tmp / "b")) == CommitFacts(JournalOf(tmp / "b_alone")));
  // The two runs used different queues.
  CHECK(RunIdOf(tmp / "a") != RunIdOf(tmp / "b"));

  // Permissions of the state dir: every directory 0700, every file 0600.
  for (const std::string& state : {tmp / "a", tmp / "b"}) {
    RunLayout layout(state);
    CHECK(ModeOf(state) == 0700);
    int dirs = 0;
    std::vector<std::string> other_files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(state)) {
      std::string p = e.path().string();
      if (e.is_directory()) {
        ++dirs;
        INFO(p);
        CHECK(ModeOf(p) == 0700);
      } else if (ModeOf(p) != 0600) {
        char m[8];
        std::snprintf(m, sizeof(m), "%04o", ModeOf(p));
        other_files.push_back(p.substr(state.size() + 1) + " " + m);
      }
    }
    CHECK(dirs >= 5);
    for (const std::string& f : {layout.JournalFile(), RunLayout::TrainSegment(layout.DataDir()),
                                RunLayout::HoldoutSegment(layout.DataDir()), RunLayout::PoolSegment(layout.DataDir())}) {
      INFO(f);
      CHECK(ModeOf(f) == 0600);
    }
    INFO("files under " << state << " that are not 0600: " << Joined(other_files, ", "));
    CHECK(other_files.empty());  // checkpoints too (written by the project's checked write, not torch's)
  }
}

}  // namespace
}  // namespace ens
