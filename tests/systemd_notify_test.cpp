// sd_notify as systemd sees it: ensembled started with NOTIFY_SOCKET (a datagram socket this
// test binds), WATCHDOG_USEC and WATCHDOG_PID=<ensembled's own pid>, like Type=notify with
// WatchdogSec= does. READY=1 only once every worker runs, STATUS= progress lines, WATCHDOG=1
// pings (on schedule also while control clients hold ensembled serve's socket), STOPPING=1 after
// SIGTERM; workers never see the notify variables.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/env_spawn_notify.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kWorkers = 2;

std::string NotifyConfig(const std::string& state_dir, int members, int epochs, int rows, int rounds) {
  return R"({
    "run_name": "notify", "state_dir": ")" + state_dir + R"(", "run_seed": 5,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(kWorkers) + R"(, "threads_per_worker": 1},
    "data": {"source": "synthetic",
             "synthetic": {"initial_rows": )" + std::to_string(rows) + R"(, "pool_rows": 400, "holdout_rows": 200}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 32, "layers": [{"units": 16}]},
                "count": )" + std::to_string(members) + R"(},
    "mutation": {"policy": "append_from_pool", "k": 20},
    "rounds": {"count": )" + std::to_string(rounds) + R"(}, "pack_size": 1
  })";
}

bool Has(const std::string& datagram, const std::string& line) {
  std::istringstream in(datagram);
  std::string l;
  while (std::getline(in, l))
    if (l == line) return true;
  return false;
}

struct ReadyView {
  double at_s = -1;
  std::vector<pid_t> children;
  std::vector<bool> children_live;
  std::vector<std::vector<std::string>> children_env;
  bool status_file = false;
};

TEST_CASE("ensembled speaks systemd's notify protocol: READY after the workers, STATUS, WATCHDOG, STOPPING",
          "[service][notify]") {
  TempDir tmp;
  std::string state = tmp / "state";
  // Long enough to be running 3 s after READY, when the test sends SIGTERM: with 30 epochs a
  // member, its 50 rounds ended in 2.9 s once members trained in the lanes (a CI failure of
  // 2026-12-06); 300 give it ten times that, and the test still stops it at ~3 s.
  WriteText(tmp / "cfg.json", NotifyConfig(state, 4, 300, 1500, 50));
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  env.set["WATCHDOG_USEC"] = "400000";
  pid_t sup = SpawnNotifyEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err",
                             env, /*watchdog_pid_self=*/true);
  Daemon d(sup);

  // Before READY: how many worker processes existed at each look.
  size_t max_children_before_ready = 0;
  ReadyView ready;
  double term_at = -1, stopping_at = -1;
  std::optional<int> exit_code;
  while (notify.Now() < 120) {
    size_t kids_now = ChildrenOf(sup).size();
    for (const auto& m : notify.Poll(20)) {
      if (Has(m.text, "READY=1") && ready.at_s < 0) {
        ready.at_s = m.at_s;
        ready.children = ChildrenOf(sup);
        for (pid_t c : ready.children) {
          ready.children_live.push_back(IsLive(c));
          ready.children_env.push_back(EnvironOf(c));
        }
        ready.status_file = std::filesystem::exists(RunLayout(state).StatusFile());
      }
      if (Has(m.text, "STOPPING=1") && stopping_at < 0) stopping_at = m.at_s;
    }
    if (ready.at_s < 0) max_children_before_ready = std::max(max_children_before_ready, kids_now);
    // Run a while after READY (several watchdog periods, at least one round), then SIGTERM.
    if (term_at < 0 && ready.at_s >= 0 && notify.Now() - ready.at_s > 3 && RoundsCommitted(state) >= 1) {
      ::kill(sup, SIGTERM);
      term_at = notify.Now();
    }
    if (d.Exited()) break;
  }
  exit_code = d.Exited() ? d.code() : std::optional<int>(d.Stop(/*now=*/true, 30));
  notify.Poll(50);
  const auto& all = notify.all();
  std::string transcript;
  for (const auto& m : all) transcript += std::to_string(m.at_s) + ": " + m.text + "\n";
  INFO("notify datagrams:\n" << transcript);
  INFO("stdout:\n" << ReadText(tmp / "out") << "\nstderr:\n" << ReadText(tmp / "err"));

  REQUIRE(ready.at_s >= 0);
  REQUIRE(term_at >= 0);
  CHECK(*exit_code == 0);

  {  // READY=1 comes once, and only when every worker process is up
    int readies = 0;
    for (const auto& m : all) readies += Has(m.text, "READY=1");
    CHECK(readies == 1);
    CHECK(ready.children.size() == static_cast<size_t>(kWorkers));
    for (bool live : ready.children_live) CHECK(live);
    CHECK(ready.status_file);  // the service side (status.json) is up by then too
    CHECK(max_children_before_ready <= static_cast<size_t>(kWorkers));
  }

  {  // workers do not inherit NOTIFY_SOCKET or the watchdog variables
    CHECK(ready.children_env.size() == static_cast<size_t>(kWorkers));
    for (const auto& envs : ready.children_env) {
      CHECK_FALSE(envs.empty());  // we could read it
      for (const auto& kv : envs) {
        CHECK(kv.rfind("NOTIFY_SOCKET=", 0) != 0);
        CHECK(kv.rfind("WATCHDOG_USEC=", 0) != 0);
        CHECK(kv.rfind("WATCHDOG_PID=", 0) != 0);
      }
    }
  }

  {  // STATUS= lines report the round
    int statuses = 0;
    for (const auto& m : all) {
      std::istringstream in(m.text);
      std::string l;
      while (std::getline(in, l))
        if (l.rfind("STATUS=", 0) == 0) {
          ++statuses;
          CHECK(l.find("round") != std::string::npos);
        }
    }
    CHECK(statuses >= 2);
  }

  {  // WATCHDOG=1 pings keep coming while it runs
    std::vector<double> pings;
    for (const auto& m : all)
      if (Has(m.text, "WATCHDOG=1")) pings.push_back(m.at_s);
    // About one every WATCHDOG_USEC/2 = 0.2 s between READY and SIGTERM (> 3 s): allow for a
    // loaded machine, but a watchdog that pings only now and then would let systemd kill it.
    int during = 0;
    double max_gap = 0;
    for (size_t i = 0; i < pings.size(); ++i) {
      if (pings[i] >= ready.at_s && pings[i] <= term_at) ++during;
      if (i > 0 && pings[i] <= term_at) max_gap = std::max(max_gap, pings[i] - pings[i - 1]);
    }
    INFO("pings between READY and SIGTERM: " << during << " over " << term_at - ready.at_s << " s; max gap " << max_gap);
    CHECK(during >= 5);
    CHECK(during >= static_cast<int>((term_at - ready.at_s) / 0.4 * 0.5));
    CHECK(max_gap < 2.0);
  }

  {  // STOPPING=1 follows SIGTERM
    CHECK(stopping_at >= term_at);
    CHECK(stopping_at - term_at < 5);
  }
}

// The unit runs `ensembled serve`: READY=1 once it listens, STATUS= with its runs, WATCHDOG=1
// within WatchdogSec while it idles between runs (its poll() sleeps at most WatchdogSec/2, not
// its usual 5 s), and STOPPING=1 after SIGTERM; its runs never see the notify variables.
TEST_CASE("ensembled serve speaks systemd's notify protocol: READY, STATUS with its runs, WATCHDOG while idle, STOPPING",
          "[service][notify][serve]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "runs.d");
  WriteText(tmp / "serve.json", R"({"runs_dir": "runs.d", "state_root": "state",
      "resources": {"gpus": "none", "cpu_workers": 1}, "service": {"control_socket": ")" + tmp / "s.sock" + "\"}}");
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  env.set["WATCHDOG_USEC"] = "1000000";  // WatchdogSec=1: a ping at least every 0.5 s
  pid_t serve = SpawnNotifyEnv({BinaryPath("ensembled"), "serve", "--config", tmp / "serve.json"}, tmp / "out",
                               tmp / "err", env, /*watchdog_pid_self=*/true);
  Daemon d(serve);
  double ready_at = -1;
  while (notify.Now() < 20 && ready_at < 0 && !d.Exited())
    for (const auto& m : notify.Poll(50))
      if (Has(m.text, "READY=1")) ready_at = m.at_s;
  INFO("stderr:\n" << ReadText(tmp / "err"));
  REQUIRE(ready_at >= 0);
  // Idle for 3 s, then a run (its `ensembled run` must not see NOTIFY_SOCKET), then idle again.
  while (notify.Now() < ready_at + 3) notify.Poll(50);
  const double idle_until = notify.Now();
  WriteText(tmp / "runs.d/one.json", R"({"run_name": "one", "run_seed": 7, "resources": {"gpus": "none", "cpu_workers": 1},
      "data": {"synthetic": {"initial_rows": 120, "pool_rows": 60, "holdout_rows": 60}},
      "members": {"defaults": {"epochs": 2, "batch_size": 16, "layers": [{"units": 8}]}, "count": 1},
      "mutation": {"policy": "none"}, "rounds": {"count": 1}})");
  std::vector<std::string> run_env;
  bool finished_status = false;
  while (notify.Now() < idle_until + 60 && !finished_status) {
    for (pid_t c : ChildrenOf(serve))
      if (run_env.empty() && CmdlineOf(c).find(" run --config ") != std::string::npos) run_env = EnvironOf(c);
    for (const auto& m : notify.Poll(20))
      if (Has(m.text, "STATUS=0 running, 0 queued; 1 finished, 0 failed, 0 cancelled")) finished_status = true;
  }
  CHECK(finished_status);
  const double term_at = notify.Now();
  d.Signal(SIGTERM);
  CHECK(d.WaitAtMost(30) == 0);
  notify.Poll(50);
  std::string transcript;
  for (const auto& m : notify.all()) transcript += std::to_string(m.at_s) + ": " + m.text + "\n";
  INFO("notify datagrams:\n" << transcript);
  int readies = 0;
  bool running_status = false, stopping = false;
  std::vector<double> pings;
  for (const auto& m : notify.all()) {
    readies += Has(m.text, "READY=1");
    running_status = running_status || Has(m.text, "STATUS=1 running, 0 queued");
    stopping = stopping || (Has(m.text, "STOPPING=1") && m.at_s >= term_at);
    if (Has(m.text, "WATCHDOG=1")) pings.push_back(m.at_s);
  }
  CHECK(readies == 1);
  CHECK(running_status);
  CHECK(stopping);
  // While idle (READY to the run's file): a ping at least every WatchdogSec, about every 0.5 s.
  double max_gap = 0, last = ready_at;
  int idle_pings = 0;
  for (double t : pings)
    if (t >= ready_at && t <= idle_until) {
      max_gap = std::max(max_gap, t - last);
      last = t;
      ++idle_pings;
    }
  max_gap = std::max(max_gap, idle_until - last);
  INFO("idle pings: " << idle_pings << ", longest gap " << max_gap << " s");
  CHECK(idle_pings >= 4);
  CHECK(max_gap < 1.0);
  REQUIRE_FALSE(run_env.empty());  // we saw the run's environment
  for (const auto& kv : run_env) {
    CHECK(kv.rfind("NOTIFY_SOCKET=", 0) != 0);
    CHECK(kv.rfind("WATCHDOG_USEC=", 0) != 0);
  }
}

// Clients that hold ensembled serve's control socket, silent or sending a byte every 100 ms
// and never a whole line, each dropped after its 2 s deadline and at once replaced: the loop
// still pings the watchdog on schedule, queues a dropped run at once and answers `list`.
TEST_CASE("ensembled serve pings the watchdog on schedule while silent and slow clients hold its control socket",
          "[service][notify][serve][control]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "runs.d");
  WriteText(tmp / "serve.json", R"({"runs_dir": "runs.d", "state_root": "state",
      "resources": {"gpus": "none", "cpu_workers": 2}, "service": {"control_socket": ")" + tmp / "s.sock" + "\"}}");
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  env.set["WATCHDOG_USEC"] = "1000000";  // WatchdogSec=1: a ping at least every 0.5 s
  Daemon d(SpawnNotifyEnv({BinaryPath("ensembled"), "serve", "--config", tmp / "serve.json"}, tmp / "out",
                          tmp / "err", env, /*watchdog_pid_self=*/true));
  double ready_at = -1;
  while (notify.Now() < 20 && ready_at < 0 && !d.Exited())
    for (const auto& m : notify.Poll(50))
      if (Has(m.text, "READY=1")) ready_at = m.at_s;
  INFO("stderr:\n" << ReadText(tmp / "err"));
  REQUIRE(ready_at >= 0);

  constexpr int kSilent = 16, kSlow = 10;  // 26: under the 32 per uid, with room for ensemblectl
  std::vector<int> clients(kSilent + kSlow, -1);
  int replaced = 0;
  const double held_from = notify.Now();
  double dropped_at = -1, queued_after = -1, list_ms = -1;
  int list_code = -1;
  while (notify.Now() < held_from + 6) {
    for (size_t i = 0; i < clients.size(); ++i) {
      int& fd = clients[i];
      if (fd >= 0) {  // dropped by the daemon (its error reply, then EOF)? Then replaced.
        struct pollfd p {fd, POLLIN, 0};
        if (::poll(&p, 1, 0) > 0) {
          char buf[4096];
          while (::recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0) {}
          ::close(fd);
          fd = -1;
          ++replaced;
        }
      }
      if (fd < 0) fd = ConnectUnix(tmp / "s.sock");
      if (fd >= 0 && i >= kSilent) (void)::send(fd, i == kSilent ? "{" : " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (dropped_at < 0 && notify.Now() > held_from + 2.5) {
      WriteText(tmp / "runs.d/.one.tmp", TinyRunConfig("one"));
      dropped_at = notify.Now();
      std::filesystem::rename(tmp / "runs.d/.one.tmp", tmp / "runs.d/one.json");
    }
    if (dropped_at >= 0 && queued_after < 0 && !QueueEvents(tmp / "state/.serve/queue.jsonl", "submitted").empty())
      queued_after = notify.Now() - dropped_at;
    if (list_ms < 0 && notify.Now() > held_from + 4) {
      auto t0 = SteadyClock::now();
      list_code = Ctl({"list", "--socket", tmp / "s.sock"}, tmp.path()).code;
      list_ms = SecondsSince(t0) * 1000;
    }
    notify.Poll(100);
  }
  const double held_until = notify.Now();
  for (int fd : clients)
    if (fd >= 0) ::close(fd);
  std::vector<double> pings;
  for (const auto& m : notify.all())
    if (Has(m.text, "WATCHDOG=1") && m.at_s >= held_from - 1) pings.push_back(m.at_s);
  double max_gap = 0;
  for (size_t i = 1; i < pings.size(); ++i) max_gap = std::max(max_gap, pings[i] - pings[i - 1]);
  if (!pings.empty()) max_gap = std::max(max_gap, held_until - pings.back());
  INFO(pings.size() << " pings, longest gap " << max_gap << " s; " << replaced << " clients dropped and replaced; run queued "
                    << queued_after << " s after its file; list exit " << list_code << " in " << list_ms << " ms");
  CHECK(pings.size() >= 10);
  CHECK(max_gap < 0.75);
  CHECK(replaced >= kSilent + kSlow);  // each held its connection to the deadline, at least once
  CHECK(queued_after >= 0);
  CHECK(queued_after < 1);
  CHECK(list_code == 0);
  CHECK(list_ms < 500);
  d.Signal(SIGTERM);
  CHECK(d.WaitAtMost(60) == 0);
}

TEST_CASE("without WATCHDOG_PID naming it, ensembled does not ping (WATCHDOG_USEC meant for another process)",
          "[service][notify]") {
  TempDir tmp;
  std::string state = tmp / "state";
  // Long enough (a few seconds) for both workers to report ready before the run ends.
  WriteText(tmp / "cfg.json", NotifyConfig(state, 4, 30, 1000, 1));
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  env.set["WATCHDOG_USEC"] = "400000";
  env.set["WATCHDOG_PID"] = "1";  // someone else's
  auto r = RunWithEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp.path(), env, 120);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  notify.Poll(100);
  int pings = 0, readies = 0;
  for (const auto& m : notify.all()) {
    pings += Has(m.text, "WATCHDOG=1");
    readies += Has(m.text, "READY=1");
  }
  CHECK(readies == 1);
  CHECK(pings == 0);
}

// Type=notify: a main process that exits before READY=1 fails the start with result
// 'protocol' even when it exits 0, and Restart=on-failure then restarts it (until the start
// rate limit trips). `ensembled run` on a finished run prints "already finished" and exits 0
// without ever sending READY=1 (orchestrator/run/supervisor.cpp Run(): the progress_.finished
// early return), so a finished service run restart-loops under systemd.
TEST_CASE("ensembled on an already finished run still tells systemd it started (READY=1) before exiting 0",
          "[service][notify]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", NotifyConfig(state, 2, 5, 200, 1));
  auto first = RunEnsembled(tmp / "cfg.json", tmp.path());
  INFO(first.out << first.err);
  REQUIRE(first.code == 0);
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  auto again = RunEnsembled(tmp / "cfg.json", tmp.path(), env, 60);
  INFO(again.out << again.err);
  REQUIRE(again.code == 0);
  CHECK(again.out.find("already finished") != std::string::npos);
  notify.Poll(100);
  int readies = 0;
  for (const auto& m : notify.all()) readies += Has(m.text, "READY=1");
  CHECK(readies == 1);
}

// READY=1 waits for WorkerPool::AllReady(): every slot must have reported ready at the same
// moment (orchestrator/run/supervisor_service.cpp ServiceTick). A slot whose worker cannot start
// (a bad GPU, a missing library on one node) stays kStarting/kDown forever while the other
// slots train the whole run, so READY=1 never comes: under systemd the start times out
// (TimeoutStartSec) and the unit is killed and restarted mid-run, again and again; a run that
// simply ends before a slow slot reports ready exits without READY=1 too ('protocol' failure).
// Here slot 1's "worker" exits at once every time; slot 0 trains every member.
TEST_CASE("READY=1 comes once the daemon is working even when one worker slot never starts",
          "[service][notify]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", NotifyConfig(state, 4, 30, 1000, 2));
  WriteText(tmp / "worker.sh", "#!/bin/sh\n[ \"$ENSEMBLED_SLOT\" = 1 ] && exit 1\nexec " + BinaryPath("ensemble-worker") +
                                   " \"$@\"\n");
  ::chmod((tmp / "worker.sh").c_str(), 0700);
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  auto r = RunWithEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json", "--worker", tmp / "worker.sh"},
                      tmp.path(), env, 120);
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(CountEvents(JournalOf(state), "member_done") == 8);  // slot 0 did all the work
  notify.Poll(100);
  int readies = 0;
  std::string transcript;
  for (const auto& m : notify.all()) {
    readies += Has(m.text, "READY=1");
    transcript += m.text + "\n";
  }
  INFO("notify datagrams:\n" << transcript);
  CHECK(readies == 1);
}

// A "command" mutation program may run up to mutation.timeout_s (no upper bound, default 60 s).
// Without pings meanwhile, a command slower than the unit's WatchdogSec would get the daemon
// SIGABRTed by systemd, restarted, and the same slow mutation decided again: a restart loop.
// Here WatchdogSec is 1 s and the command takes 3 s.
TEST_CASE("the watchdog keeps being pinged while a mutation command runs", "[service][notify]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "mutate.sh", "#!/bin/sh\ncat > /dev/null\nsleep 3\necho '{\"add\": [], \"drop\": []}'\n");
  ::chmod((tmp / "mutate.sh").c_str(), 0700);
  std::string cfg = NotifyConfig(state, 2, 10, 300, 2);
  cfg.replace(cfg.find(R"({"policy": "append_from_pool", "k": 20})"),
              std::string(R"({"policy": "append_from_pool", "k": 20})").size(),
              R"({"policy": "command", "argv": [")" + tmp / "mutate.sh" + R"("], "timeout_s": 30})");
  WriteText(tmp / "cfg.json", cfg);
  NotifyListener notify(tmp / "notify.sock");
  REQUIRE(notify.ok());
  EnvChanges env;
  env.set["NOTIFY_SOCKET"] = tmp / "notify.sock";
  env.set["WATCHDOG_USEC"] = "1000000";
  Daemon d(SpawnNotifyEnv({BinaryPath("ensembled"), "run", "--config", tmp / "cfg.json"}, tmp / "out", tmp / "err", env,
                          /*watchdog_pid_self=*/true));
  while (!d.Exited() && notify.Now() < 120) notify.Poll(50);
  notify.Poll(50);
  INFO(ReadText(tmp / "out") << ReadText(tmp / "err"));
  REQUIRE(d.WaitAtMost(10) == 0);
  REQUIRE(CountEvents(JournalOf(state), "round_committed") == 2);
  std::vector<double> pings;
  double stopping = 1e9;
  for (const auto& m : notify.all()) {
    if (Has(m.text, "WATCHDOG=1")) pings.push_back(m.at_s);
    if (Has(m.text, "STOPPING=1")) stopping = std::min(stopping, m.at_s);
  }
  double max_gap = 0;
  for (size_t i = 1; i < pings.size() && pings[i] <= stopping; ++i) max_gap = std::max(max_gap, pings[i] - pings[i - 1]);
  INFO(pings.size() << " pings; the longest gap before STOPPING=1: " << max_gap << " s (WatchdogSec: 1 s)");
  CHECK(pings.size() >= 3);
  CHECK(max_gap < 1.0);
}

}  // namespace
}  // namespace ens
