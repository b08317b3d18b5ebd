// Stopping: SIGTERM once lets the running members finish and exits 0 (within stop_timeout_s);
// SIGTERM twice stops at once. Either way no worker is left, the journal is intact, and
// running the same config again completes with the undisturbed run's bits.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr double kStopTimeout = 30;

std::string Config(const std::string& state_dir, int rounds, int members, int epochs) {
  return R"({"run_name": "stop", "state_dir": ")" + state_dir + R"(", "run_seed": 41,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 400, "pool_rows": 200, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 16,
                             "layers": [{"units": 32}, {"units": 16}]},
                "count": )" + std::to_string(members) + R"(},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "stop_timeout_s": )" + std::to_string(kStopTimeout) + R"(,
    "pack_size": 1,  // one member per task
    "rounds": {"count": )" + std::to_string(rounds) + "}}";
}

// A running ensembled, its worker pids as seen so far, and a bounded wait for a condition.
struct Watched {
  pid_t pid = 0;
  std::set<pid_t> workers;
  std::optional<int> code;

  void Look() {
    if (code) return;
    if (auto c = TryWait(pid)) {
      code = c;
      return;
    }
    for (pid_t w : ChildrenOf(pid)) workers.insert(w);
  }
  // Polls until cond() or exit or timeout; true when cond() held.
  template <typename F>
  bool Until(F cond, double timeout_s) {
    auto t0 = SteadyClock::now();
    while (SecondsSince(t0) < timeout_s) {
      Look();
      if (code) return false;
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  // Waits for the exit; SIGKILLs after timeout_s. Returns seconds waited.
  double Finish(double timeout_s, bool* timed_out) {
    auto t0 = SteadyClock::now();
    *timed_out = false;
    while (!code) {
      Look();
      if (code) break;
      if (SecondsSince(t0) > timeout_s) {
        ::kill(pid, SIGKILL);
        code = Wait(pid);
        *timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return SecondsSince(t0);
  }
};

std::vector<pid_t> StillLive(const std::set<pid_t>& pids) {
  std::vector<pid_t> out;
  for (pid_t p : pids)
    if (IsLive(p) && CmdlineOf(p).find("ensemble-worker") != std::string::npos) out.push_back(p);
  return out;
}

int DoneNow(const std::string& state) { return CountEvents(JournalOf(state), "member_done"); }

void CheckJournalIntact(const std::string& state) {
  RunLayout layout(state);
  auto recs = ReadJournal(layout.JournalFile());
  REQUIRE(recs.ok());
  std::string text = ReadText(layout.JournalFile());
  CHECK((!text.empty() && text.back() == '\n'));  // no torn last line
  for (const auto& r : *recs)
    if (r.value("event", "") == "member_done") {
      std::string problem = MemberDirProblem(layout.MemberDir(r["round"].get<int>(), r["member"].get<std::string>()));
      INFO(problem);
      CHECK(problem.empty());
    }
}

// Runs the config undisturbed in tmp/calm (it must succeed), then starts the same config in
// tmp/stop as *run. Returns the undisturbed run.
TimedRun CalmThenStart(const TempDir& tmp, int rounds, int members, int epochs, Watched* run) {
  WriteText(tmp / "calm.json", Config(tmp / "calm", rounds, members, epochs));
  WriteText(tmp / "stop.json", Config(tmp / "stop", rounds, members, epochs));
  TimedRun calm = RunEnsembled(tmp / "calm.json", tmp.path(), {}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);
  run->pid = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "stop.json"}, tmp / "stop.out",
                      tmp / "stop.err");
  return calm;
}

TEST_CASE("SIGTERM once lets running members finish and exits 0 and the run resumes to the same bits",
          "[resilience][stop]") {
  const int rounds = 2, members = 4, epochs = 240;
  TempDir tmp;
  Watched run;
  TimedRun calm = CalmThenStart(tmp, rounds, members, epochs, &run);
  bool got_one = run.Until([&] { return DoneNow(tmp / "stop") >= 1; }, 60);
  INFO("stop run:\n" << ReadText(tmp / "stop.out") << ReadText(tmp / "stop.err"));
  REQUIRE(got_one);
  int done_at_signal = DoneNow(tmp / "stop");
  std::map<std::string, int64_t> mtimes;
  RunLayout layout(tmp / "stop");
  for (const auto& r : JournalOf(tmp / "stop"))
    if (r.value("event", "") == "member_done") {
      std::string dir = layout.MemberDir(r["round"].get<int>(), r["member"].get<std::string>());
      mtimes[dir] = MtimeNs(dir + "/weights.bin");
    }
  ::kill(run.pid, SIGTERM);
  bool timed_out = false;
  double stop_seconds = run.Finish(kStopTimeout + 20, &timed_out);
  std::string err = ReadText(tmp / "stop.err");
  INFO("stop run (after exit):\n" << ReadText(tmp / "stop.out") << err);
  REQUIRE_FALSE(timed_out);
  CHECK(*run.code == 0);
  CHECK(stop_seconds < kStopTimeout);
  CHECK(err.find("stop requested") != std::string::npos);
  CHECK(err.find("stop_timeout_s passed") == std::string::npos);
  CHECK(run.workers.size() >= 2);
  auto live = StillLive(run.workers);
  CHECK(live.empty());
  CheckJournalIntact(tmp / "stop");
  auto recs = JournalOf(tmp / "stop");
  int done_after = CountEvents(recs, "member_done");
  CHECK_FALSE(ReplayJournal(recs).finished);
  CHECK(done_after >= done_at_signal + 1);  // the member running on the other worker was let finish
  std::printf("[graceful_stop] SIGTERM once at %d member_done: exit %d after %.2f s, %d member_done when it exited "
              "(undisturbed run %.1f s)\n",
              done_at_signal, *run.code, stop_seconds, done_after, calm.seconds);

  auto resumed = RunEnsembled(tmp / "stop.json", tmp.path(), {}, 90);
  INFO("resumed:\n" << resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  std::printf("[graceful_stop] resumed run completed in %.1f s\n", resumed.seconds);
  std::fflush(stdout);
  recs = JournalOf(tmp / "stop");
  CHECK(ReplayJournal(recs).finished);
  for (const auto& [key, n] : DoneCounts(recs)) {
    INFO("round " << key.first << " member " << key.second);
    CHECK(n == 1);
  }
  for (const auto& [dir, t] : mtimes) {
    INFO(dir << " was done before the stop");
    CHECK(MtimeNs(dir + "/weights.bin") == t);
  }
  auto diffs = CompareRuns(tmp / "calm", tmp / "stop", rounds, members, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
  CHECK(CommitFacts(recs).size() == CommitFacts(JournalOf(tmp / "calm")).size());
}

TEST_CASE("SIGTERM twice stops at once and the run still resumes to the same bits", "[resilience][stop]") {
  // Slow members (~5 s each here): a graceful stop would take seconds, a stop at once does
  // not. With 200 epochs they took ~1 s on this machine, and under ctest -j2 a member could
  // finish in the 0.8 s between "both running" and the second signal.
  const int rounds = 1, members = 2, epochs = 3200;
  TempDir tmp;
  Watched run;
  TimedRun calm = CalmThenStart(tmp, rounds, members, epochs, &run);
  std::string status_file = RunLayout(tmp / "stop").StatusFile();
  bool busy = run.Until(
      [&] {
        json s = json::parse(ReadText(status_file), nullptr, false);
        return s.is_object() && s.value("members_running", 0) == 2;
      },
      60);
  INFO("stop run:\n" << ReadText(tmp / "stop.out") << ReadText(tmp / "stop.err"));
  REQUIRE(busy);
  run.Until([] { return false; }, 0.5);  // half a second into the members
  int done_at_signal = DoneNow(tmp / "stop");
  auto t_signal = SteadyClock::now();
  ::kill(run.pid, SIGTERM);
  // Two signals sent back to back can merge into one pending SIGTERM (standard signals do
  // not queue), so the second comes 0.3 s later, as a second Ctrl-C would.
  run.Until([] { return false; }, 0.3);
  ::kill(run.pid, SIGTERM);
  bool timed_out = false;
  run.Finish(kStopTimeout + 20, &timed_out);
  double stop_seconds = SecondsSince(t_signal);
  std::string err = ReadText(tmp / "stop.err");
  INFO("stop run (after exit):\n" << ReadText(tmp / "stop.out") << err);
  REQUIRE_FALSE(timed_out);
  CHECK(*run.code == 0);
  CHECK(stop_seconds < 5);
  CHECK(DoneNow(tmp / "stop") == done_at_signal);  // the running members were stopped, not finished
  auto live = StillLive(run.workers);
  CHECK(live.empty());
  CheckJournalIntact(tmp / "stop");
  std::printf("[graceful_stop] SIGTERM twice (0.3 s apart) with 2 members running: exit %d %.2f s after the first "
              "signal (undisturbed run %.1f s)\n",
              *run.code, stop_seconds, calm.seconds);

  auto resumed = RunEnsembled(tmp / "stop.json", tmp.path(), {}, 90);
  INFO("resumed:\n" << resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  std::printf("[graceful_stop] resumed run completed in %.1f s\n", resumed.seconds);
  std::fflush(stdout);
  CHECK(ReplayJournal(JournalOf(tmp / "stop")).finished);
  auto diffs = CompareRuns(tmp / "calm", tmp / "stop", rounds, members, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

// A mutation command may run for minutes. SIGTERM twice while it runs: the command is killed,
// the daemon exits 0 at once without committing the round, and the rerun decides the
// mutation again and completes with the undisturbed run's commits.
TEST_CASE("SIGTERM twice during a slow mutation command stops at once and the rerun commits the round",
          "[resilience][stop][mutation]") {
  TempDir tmp;
  // Slow only while tmp/slow exists; it writes tmp/started first, so the test knows it runs.
  WriteText(tmp / "mutate.sh", "#!/bin/sh\ncat > /dev/null\ntouch '" + tmp / "started" + "'\n"
            "if [ -e '" + tmp / "slow" + "' ]; then sleep 60; fi\necho '{\"add\": [], \"drop\": []}'\n");
  ::chmod((tmp / "mutate.sh").c_str(), 0700);
  auto config = [&](const std::string& state) {
    std::string c = Config(state, 2, 2, 5);
    const std::string from = R"({"policy": "append_from_pool", "k": 10})";
    return c.replace(c.find(from), from.size(),
                     R"({"policy": "command", "argv": [")" + tmp / "mutate.sh" + R"("], "timeout_s": 120})");
  };
  WriteText(tmp / "calm.json", config(tmp / "calm"));
  WriteText(tmp / "stop.json", config(tmp / "stop"));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);
  std::filesystem::remove(tmp / "started");

  WriteText(tmp / "slow", "");
  Watched run;
  run.pid = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "stop.json"}, tmp / "stop.out", tmp / "stop.err");
  bool mutating = run.Until([&] { return std::filesystem::exists(tmp / "started"); }, 60);
  INFO("stop run:\n" << ReadText(tmp / "stop.out") << ReadText(tmp / "stop.err"));
  REQUIRE(mutating);
  auto t_signal = SteadyClock::now();
  ::kill(run.pid, SIGTERM);
  run.Until([] { return false; }, 0.3);
  ::kill(run.pid, SIGTERM);
  bool timed_out = false;
  run.Finish(30, &timed_out);
  double stop_seconds = SecondsSince(t_signal);
  INFO("stop run (after exit):\n" << ReadText(tmp / "stop.out") << ReadText(tmp / "stop.err"));
  REQUIRE_FALSE(timed_out);
  CHECK(*run.code == 0);
  CHECK(stop_seconds < 5);
  CHECK(ReadText(tmp / "stop.err").find("abandoned") != std::string::npos);
  CHECK(CountEvents(JournalOf(tmp / "stop"), "round_committed") == 0);
  CheckJournalIntact(tmp / "stop");
  std::printf("[graceful_stop] SIGTERM twice during a mutation command: exit %d %.2f s after the first signal\n",
              *run.code, stop_seconds);

  std::filesystem::remove(tmp / "slow");
  auto resumed = RunEnsembled(tmp / "stop.json", tmp.path(), {}, 90);
  INFO("resumed:\n" << resumed.out << resumed.err);
  REQUIRE(resumed.code == 0);
  CHECK(CommitFacts(JournalOf(tmp / "stop")) == CommitFacts(JournalOf(tmp / "calm")));
  auto diffs = CompareRuns(tmp / "calm", tmp / "stop", 2, 2, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace
}  // namespace ens
