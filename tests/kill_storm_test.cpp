// Kill storm: while a run is going, workers are SIGKILLed at random every 0.2-1 s (about 20
// kills). Every lost task is retried on a respawned worker, and the result is the undisturbed
// run's, bit for bit.
#include <algorithm>
#include <cstdio>
#include <random>

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kRounds = 3;
constexpr int kMembers = 6;
constexpr int kTargetKills = 20;
// Workers younger than this are not killed (see the storm loop).
constexpr double kMinVictimAgeS = 1.5;

// Sized so that the undisturbed run takes ~10-20 s with 2 CPU workers on a 2-core machine.
// pack_size "1": one member per task; "\"auto\"": two fused packs of three (one per variant),
// which train several times faster, so they get more epochs to keep the storm going.
std::string Config(const std::string& state_dir, const std::string& pack_size, int epochs) {
  return R"({"run_name": "storm", "state_dir": ")" + state_dir + R"(", "run_seed": 17,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 400, "pool_rows": 200, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 16, "layers": [{"units": 32}, {"units": 16}]},
                "count": 6,
                "variants": [{"split": "random"}, {"split": "bootstrap", "layers": [{"units": 24, "dropout": 0.1}]}]},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "max_task_attempts": 50,
    "pack_size": )" + pack_size + R"(,
    "rounds": {"count": 3}})";
}

void Storm(const std::string& pack_size, int epochs) {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm", pack_size, epochs));
  WriteText(tmp / "storm.json", Config(tmp / "storm", pack_size, epochs));

  // A hang guard, not a speed bound: under ctest -j2 next to the 256-worker test it took > 90 s.
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {}, 300);
  INFO("undisturbed run:\n" << calm.out << calm.err);
  REQUIRE_FALSE(calm.timed_out);
  REQUIRE(calm.code == 0);

  // The storm: SIGKILL a random live child of ensembled every random 0.2-1 s.
  uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> gap(0.2, 1.0);
  auto next_gap = [&] { return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(gap(rng))); };
  pid_t sup = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "storm.json"}, tmp / "storm.out",
                       tmp / "storm.err");
  // A hang guard too: the storm's run redoes killed work and restarts workers (libtorch
  // loads again each time), so it gets the calm run's time three times over, at least 300 s.
  // 110 s flat was exceeded when other builds shared the 2 cores (the workers took 14 s to
  // start after the last kill).
  const double storm_limit = std::max(300.0, 3 * calm.seconds);
  auto t0 = SteadyClock::now();
  auto next_kill = t0 + next_gap();
  int kills = 0, code = -1;
  bool timed_out = false;
  double storm_seconds = 0;
  std::string kill_log;
  for (;;) {
    if (auto c = TryWait(sup)) {
      code = *c;
      break;
    }
    if (SecondsSince(t0) > storm_limit) {
      ::kill(sup, SIGKILL);
      Wait(sup);
      timed_out = true;
      break;
    }
    auto now = SteadyClock::now();
    if (kills < kTargetKills && now >= next_kill) {
      std::vector<pid_t> live;
      // A worker younger than kMinVictimAgeS is left alone: under ctest -j2 a worker may take
      // over a second to load libtorch, and a slot whose worker is killed before it is ready
      // ten times in a row is given up on (worker_pool.h), as it should be. Kills still land
      // in every phase of a member's training and in the supervisor's restarts.
      for (pid_t c : ChildrenOf(sup))
        if (IsLive(c) && ProcessAgeSeconds(c) >= kMinVictimAgeS) live.push_back(c);
      if (!live.empty()) {
        pid_t victim = live[rng() % live.size()];
        if (::kill(victim, SIGKILL) == 0) {
          ++kills;
          storm_seconds = SecondsSince(t0);
          char line[96];
          std::snprintf(line, sizeof(line), "  t=%5.2fs kill pid %d\n", storm_seconds, victim);
          kill_log += line;
        }
      }
      next_kill = now + next_gap();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double total_seconds = SecondsSince(t0);
  std::string out = ReadText(tmp / "storm.out"), err = ReadText(tmp / "storm.err");
  INFO("storm seed " << seed << ", kills:\n" << kill_log << "storm run stdout:\n" << out << "\nstderr:\n" << err);
  // A retried member must not crash its worker (a kill inside a member's write window leaves
  // <member>.tmp files or an unjournaled member directory behind; see supervisor_crash_test).
  CHECK(err.find("killed by signal 11") == std::string::npos);
  REQUIRE_FALSE(timed_out);
  REQUIRE(code == 0);

  auto calm_recs = JournalOf(tmp / "calm");
  auto storm_recs = JournalOf(tmp / "storm");
  int retries = RetriedMembers(storm_recs);
  // stderr lines: "slot N: worker pid P killed by signal 9" per death the supervisor saw, and
  // "round R member M attempt A failed: worker pid P killed by signal 9" per task it lost.
  int deaths = 0, lost_tasks = 0;
  {
    std::istringstream lines(err);
    for (std::string line; std::getline(lines, line);) {
      if (line.find("killed by signal 9") == std::string::npos) continue;
      if (line.find("failed: worker pid") != std::string::npos) ++lost_tasks;
      else if (line.find("] slot ") != std::string::npos) ++deaths;
    }
  }
  json status = json::parse(ReadText(RunLayout(tmp / "storm").StatusFile()), nullptr, false);
  int restarts = status.is_object() ? status.value("unplanned_restarts", -1) : -1;
  int max_attempt = 0;
  for (const auto& r : storm_recs)
    if (r.value("event", "") == "member_done") max_attempt = std::max(max_attempt, r.value("attempt", 1));
  std::printf("[kill_storm] pack_size %s, seed %u: %d SIGKILLs delivered over %.1f s; undisturbed run %.1f s, "
              "storm run %.1f s\n",
              pack_size.c_str(), seed, kills, storm_seconds, calm.seconds, total_seconds);
  std::printf("[kill_storm] journal: %d member_done with attempt > 1 (highest attempt %d), %d member_failed; "
              "supervisor logged %d worker deaths by signal 9 and %d lost tasks; status.json unplanned_restarts %d\n",
              retries, max_attempt, CountEvents(storm_recs, "member_failed"), deaths, lost_tasks, restarts);
  std::fflush(stdout);
  WARN("kill storm: " << kills << " kills delivered, " << retries << " retried members (member_done attempt > 1), "
                      << "undisturbed " << calm.seconds << " s, storm " << total_seconds << " s, seed " << seed);

  // The storm did happen. A kill may land on a worker that is still starting up after
  // kMinVictimAgeS (a loaded machine) or between its tasks, so a storm may, rarely, cost no
  // task at all.
  CHECK(kills >= kTargetKills / 2);
  if (retries == 0) WARN("no kill hit a busy worker this time (seed " << seed << ")");
  // The supervisor noticed every death (one may fall into its final shutdown, which reaps quietly).
  CHECK(deaths <= kills);
  CHECK(deaths >= kills - 1);

  {  // the journal shows one member_done per member and round, and the same commits
    RunProgress p = ReplayJournal(storm_recs);
    CHECK(p.finished);
    auto counts = DoneCounts(storm_recs);
    CHECK(counts.size() == static_cast<size_t>(kRounds * kMembers));
    for (const auto& [key, n] : counts) {
      INFO("round " << key.first << " member " << key.second);
      CHECK(n == 1);
    }
    auto calm_commits = CommitFacts(calm_recs), storm_commits = CommitFacts(storm_recs);
    REQUIRE(calm_commits.size() == static_cast<size_t>(kRounds));
    REQUIRE(storm_commits.size() == calm_commits.size());
    for (size_t i = 0; i < calm_commits.size(); ++i) {
      INFO("round " << i);
      CHECK(storm_commits[i]["train_rows"] == calm_commits[i]["train_rows"]);
      CHECK(storm_commits[i]["trained_rows"] == calm_commits[i]["trained_rows"]);
      CHECK(storm_commits[i]["pool_used"] == calm_commits[i]["pool_used"]);
    }
  }

  {  // every member checkpoint of every round equals the undisturbed run's bit for bit
    auto diffs = CompareRuns(tmp / "calm", tmp / "storm", kRounds, kMembers, tmp.path());
    INFO(Joined(diffs));
    CHECK(diffs.empty());
    // Not vacuous: two members of one run differ.
    auto differ = CompareMemberDirs({{RunLayout(tmp / "calm").MemberDir(0, "m000"),
                                      RunLayout(tmp / "calm").MemberDir(0, "m002")}},
                                    tmp.path());
    CHECK(differ[0] != "equal");
  }
}

TEST_CASE("a storm of SIGKILLs on random workers changes no bit of the result", "[resilience][kill_storm]") {
  Storm("1", 1200);  // long enough for ten kills of workers past kMinVictimAgeS
}

// A kill can land between the reports of a pack: the retried pack then holds journaled
// members, which it trains again without rewriting (task publish false).
TEST_CASE("a storm of SIGKILLs on workers training fused packs changes no bit of the result",
          "[resilience][kill_storm][pack]") {
  Storm("\"auto\"", 1800);
}

}  // namespace
}  // namespace ens
