// Test support for `ensembled serve`: a daemon in a temporary directory (runs_dir, state_root,
// control socket), tiny run configs, `ensemblectl list --json` and bounded waits on it.
// Header-only; builds on env_spawn.h. Not thread-safe.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "env_spawn.h"

namespace ens::testing {

// A run that trains in a few seconds: `members` small MLPs, 2 epochs, `rounds` rounds of
// synthetic data. `extra` is added to the top level (e.g. "\"state_dir\": \"...\",").
// `gpus`: the run's resources.gpus as JSON text.
inline std::string TinyRunConfig(const std::string& name, int cpu_workers = 2, int rounds = 1,
                                 const std::string& extra = "", int members = 2, int epochs = 2,
                                 const std::string& gpus = "\"none\"") {
  return R"({"run_name": ")" + name + R"(", "run_seed": 7, )" + extra + R"(
    "resources": {"gpus": )" + gpus + R"(, "cpu_workers": )" + std::to_string(cpu_workers) + R"(},
    "data": {"synthetic": {"initial_rows": 120, "pool_rows": 60, "holdout_rows": 60}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 16,
                             "layers": [{"units": 8}]}, "count": )" + std::to_string(members) + R"(},
    "mutation": {"policy": "append_from_pool", "k": 10},
    "pack_size": 1,
    "rounds": {"count": )" + std::to_string(rounds) + R"(}})";
}

class ServeDaemonHarness {
 public:
  // `service_extra`: more of the serve config's "service" (", \"http_port\": 9000").
  // `top_extra`: more top-level keys, each followed by a comma ("\"preemption\": {...},").
  explicit ServeDaemonHarness(int cpu_workers = 2, const std::string& gpus = "\"none\"",
                              const std::string& service_extra = "", const std::string& top_extra = "") {
    serve_config_ = tmp_ / "serve.json";
    WriteText(serve_config_, R"({"runs_dir": "runs.d", "state_root": "state", )" + top_extra + R"(
      "resources": {"gpus": )" + gpus + R"(, "cpu_workers": )" + std::to_string(cpu_workers) + R"(},
      "service": {"control_socket": ")" + socket() + "\"" + service_extra + "}}");
    std::filesystem::create_directories(runs_dir());
  }
  ~ServeDaemonHarness() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait(pid_);
    }
  }
  std::string runs_dir() const { return tmp_ / "runs.d"; }
  std::string state_root() const { return tmp_ / "state"; }
  std::string socket() const { return tmp_ / "s.sock"; }
  std::string StateDir(const std::string& run) const { return state_root() + "/" + run; }
  std::string QueueJournal() const { return state_root() + "/.serve/queue.jsonl"; }
  const TempDir& tmp() const { return tmp_; }
  pid_t pid() const { return pid_; }

  // Starts the daemon and waits until it answers on its socket.
  void Start(const EnvChanges& env = {}) {
    ++starts_;
    pid_ = SpawnEnv({BinaryPath("ensembled"), "serve", "--config", serve_config_}, Log(".out"), Log(".err"), env);
    WaitUntil([&] { return !ListRuns().is_discarded(); }, 20, "the daemon answering on its socket");
  }
  // SIGTERM (or `sig`) and the exit code; -1 when it did not exit within timeout_s.
  int Stop(int sig = SIGTERM, double timeout_s = 60) {
    ::kill(pid_, sig);
    int code = WaitAtMost(pid_, timeout_s);
    pid_ = -1;
    return code;
  }
  std::string DaemonLog() const { return ReadText(Log(".err")); }

  TimedRun Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("ensemblectl"));
    return RunWithEnv(args, tmp_.path(), {}, 30);
  }
  // `ensemblectl list --json`'s runs; a discarded value when it failed.
  nlohmann::json ListRuns() {
    TimedRun r = Ctl({"list", "--socket", socket(), "--json"});
    if (r.code != 0) return nlohmann::json(nlohmann::json::value_t::discarded);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() && j.contains("runs") ? j["runs"] : nlohmann::json(nlohmann::json::value_t::discarded);
  }
  // The run named `name` in the list, or null.
  nlohmann::json Run(const std::string& name) {
    nlohmann::json runs = ListRuns();
    if (runs.is_discarded()) return nullptr;
    for (const auto& r : runs)
      if (r.value("name", "") == name) return r;
    return nullptr;
  }
  std::string StateOf(const std::string& name) {
    nlohmann::json r = Run(name);
    return r.is_object() ? r.value("state", "") : "";
  }

  // Polls `done` every 100 ms; FAILs the test (naming `what` and the daemon's log) after timeout_s.
  void WaitUntil(const std::function<bool()>& done, double timeout_s, const std::string& what) {
    auto t0 = SteadyClock::now();
    while (!done()) {
      if (SecondsSince(t0) > timeout_s) {
        INFO("daemon log:\n" << DaemonLog());
        FAIL("timed out after " << timeout_s << " s waiting for " << what);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  void WaitForState(const std::string& name, const std::string& state, double timeout_s = 60) {
    WaitUntil([&] { return StateOf(name) == state; }, timeout_s, "run " + name + " " + state);
  }

  // The `ensembled run` children of the daemon now.
  std::vector<pid_t> RunChildren() const {
    std::vector<pid_t> out;
    for (pid_t c : ChildrenOf(pid_))
      if (CmdlineOf(c).find(" run --config ") != std::string::npos && IsLive(c)) out.push_back(c);
    return out;
  }

 private:
  std::string Log(const std::string& ext) const { return tmp_ / ("daemon" + std::to_string(starts_) + ext); }
  TempDir tmp_;
  std::string serve_config_;
  pid_t pid_ = -1;
  int starts_ = 0;
};

// The queue journal's records of one event kind, in order.
inline std::vector<nlohmann::json> QueueEvents(const std::string& journal, const std::string& event) {
  std::vector<nlohmann::json> out;
  auto recs = ReadJournal(journal);
  if (!recs.ok()) return out;
  for (const auto& r : *recs)
    if (r.value("event", "") == event) out.push_back(r);
  return out;
}

// A tiny run served by `d` (TinyRunConfig(name, cpu_workers, rounds, "", members, epochs)),
// finished: each of its members is in its journal once, and its bits are those of the same
// config run alone with `ensembled run` (into <tmp>/alone).
inline void CheckSameAsRunAlone(const ServeDaemonHarness& d, const std::string& name, int cpu_workers, int rounds,
                                int members, int epochs) {
  const auto done = DoneCounts(JournalOf(d.StateDir(name)));
  for (const auto& [key, n] : done) {
    INFO("round " << key.first << " member " << key.second);
    CHECK(n == 1);
  }
  CHECK(done.size() == static_cast<size_t>(rounds * members));
  WriteText(d.tmp() / "alone.json",
            TinyRunConfig(name, cpu_workers, rounds, "\"state_dir\": \"" + d.tmp() / "alone" + "\",", members, epochs));
  auto alone = RunEnsembled(d.tmp() / "alone.json", d.tmp().path(), {}, 240);
  REQUIRE(alone.code == 0);
  auto diffs = CompareRuns(d.tmp() / "alone", d.StateDir(name), rounds, members, d.tmp().path(), CompareMode::kBytes);
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace ens::testing
