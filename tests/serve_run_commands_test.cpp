// `ensemblectl <command> --socket S NAME` on a run of `ensembled serve` (the real ensembled,
// ensemblectl and ensemble-worker; orchestrator/serve/serve_run_commands.cpp): status of a queued and
// of a running run, pause and resume passed to the run's supervisor, reload of the run's file
// (accepted, refused by the supervisor, refused by the daemon), stop, and a state-directory
// command (export) found by name, and a run's supervisor that does not answer (it holds up
// neither the daemon's loop nor other clients). Who may do it: tests/serve_daemon_test.cpp's
// uid case.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

// A served run's status through the daemon, as JSON; discarded when the command failed.
json StatusOf(ServeDaemonHarness& d, const std::string& name) {
  TimedRun r = d.Ctl({"status", "--socket", d.socket(), name, "--json"});
  if (r.code != 0) return json(json::value_t::discarded);
  return json::parse(r.out, nullptr, false);
}

// The daemon asks a run's supervisor from its loop without waiting (ServeDaemon::AskRun): with
// the supervisor stopped (SIGSTOP: it accepts, never answers), `pause` is answered "did not
// answer" after the daemon's 4 s, and meanwhile `list` is answered at once.
TEST_CASE("a run's supervisor that does not answer holds up neither the daemon nor other clients",
          "[serve][integration][control]") {
  ServeDaemonHarness d(2);
  WriteText(d.runs_dir() + "/long.json", TinyRunConfig("long", 2, 25, "", 40, 5));
  d.Start();
  d.WaitForState("long", "running", 20);
  d.WaitUntil([&] { return StatusOf(d, "long")["live"].is_object(); }, 60, "long's supervisor answering");
  const pid_t sup = d.Run("long").value("pid", 0);
  REQUIRE(sup > 0);
  REQUIRE(::kill(sup, SIGSTOP) == 0);
  auto t0 = SteadyClock::now();
  pid_t pause = SpawnEnv({BinaryPath("ensemblectl"), "pause", "--socket", d.socket(), "long"},
                         d.tmp() / "pause.out", d.tmp() / "pause.err", {});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto l0 = SteadyClock::now();
  TimedRun list = d.Ctl({"list", "--socket", d.socket()});
  double list_ms = SecondsSince(l0) * 1000;
  int pause_code = WaitAtMost(pause, 20);
  double pause_s = SecondsSince(t0);
  ::kill(sup, SIGCONT);
  std::string pause_err = ReadText(d.tmp() / "pause.err");
  INFO("list took " << list_ms << " ms; pause took " << pause_s << " s, exit " << pause_code << ": " << pause_err);
  CHECK(list.code == 0);
  CHECK(list_ms < 500);
  CHECK(pause_code != 0);
  CHECK_THAT(pause_err, Catch::Contains("run 'long' did not answer"));
  CHECK(pause_s > 3.5);
  CHECK(pause_s < 5);
  // It answers again once it runs: the pause it read late (the connection was closed) applies.
  d.WaitUntil([&] { return StatusOf(d, "long")["live"].is_object(); }, 30, "long's supervisor answering again");
  CHECK(d.Stop() == 0);
}

TEST_CASE("per-run commands by name through the serve daemon", "[serve][integration]") {
  ServeDaemonHarness d(2);
  const std::string long_file = d.runs_dir() + "/long.json";
  const std::string long_config = TinyRunConfig("long", 2, 25, R"("stop_timeout_s": 30,)", 40, 5);
  WriteText(long_file, long_config);
  d.Start();
  d.WaitForState("long", "running", 20);
  WriteText(d.runs_dir() + "/after.json", TinyRunConfig("after"));
  d.WaitForState("after", "queued", 20);

  // A run that has not started: the queue's view alone.
  TimedRun r = d.Ctl({"status", "--socket", d.socket(), "after"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("not started yet"));
  CHECK_THAT(r.out, Catch::Contains("served: queued, asks 2 CPU workers; needs 2 CPU workers, 0 free"));
  // Naming a run needs the daemon's socket; naming nothing is a usage error; an unknown run is named.
  CHECK(d.Ctl({"status", "after"}).code == 64);
  CHECK(d.Ctl({"pause", "--socket", d.socket()}).code == 64);
  r = d.Ctl({"status", "--socket", d.socket(), "nosuch"});
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("no run named 'nosuch'"));
  r = d.Ctl({"pause", "--socket", d.socket(), "after"});
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("run 'after' is queued; pause applies to a running run"));

  d.WaitUntil([&] { return CountEvents(JournalOf(d.StateDir("long")), "member_done") >= 1; }, 60, "a member of long");
  json st = StatusOf(d, "long");
  REQUIRE(st.is_object());
  CHECK(st["running"] == true);
  CHECK(st["served"]["state"] == "running");
  CHECK(st["live"].is_object());  // the supervisor's answer, passed on by the daemon
  CHECK(st["live"]["paused"] == false);

  // pause and resume reach the run's supervisor.
  r = d.Ctl({"pause", "--socket", d.socket(), "long"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("paused"));
  st = StatusOf(d, "long");
  REQUIRE(st.is_object());
  CHECK(st["live"]["paused"] == true);
  r = d.Ctl({"resume", "--socket", d.socket(), "long"});
  CHECK(r.code == 0);
  CHECK(StatusOf(d, "long")["live"]["paused"] == false);

  // reload: the run's file is read again; a live change is accepted and the effective config follows.
  const std::string effective = d.state_root() + "/.serve/configs/long.json";
  // More rounds, not fewer: a run cut short may finish before the reloads below (on a fast CPU).
  WriteText(long_file, std::regex_replace(long_config, std::regex(R"("count": 25)"), R"("count": 60)"));
  r = d.Ctl({"reload", "--socket", d.socket(), "long"});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("accepted"));
  const std::string after_reload = ReadText(effective);
  CHECK_THAT(after_reload, Catch::Contains("\"count\": 60"));
  CHECK(d.Run("long")["rounds"] == 60);
  // A change the supervisor refuses leaves the effective config as it was.
  WriteText(long_file, std::regex_replace(long_config, std::regex(R"("run_seed": 7)"), R"("run_seed": 8)"));
  r = d.Ctl({"reload", "--socket", d.socket(), "long"});
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("/run_seed"));
  CHECK(ReadText(effective) == after_reload);
  // A change of what the run holds is the daemon's to refuse, with its pointer.
  WriteText(long_file, std::regex_replace(long_config, std::regex(R"("cpu_workers": 2)"), R"("cpu_workers": 1)"));
  r = d.Ctl({"reload", "--socket", d.socket(), "long"});
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("/resources: a served run's resources cannot change by reload"));
  CHECK(ReadText(effective) == after_reload);

  // stop: a graceful stop, as cancel; then the queued run gets the workers and finishes.
  r = d.Ctl({"stop", "--socket", d.socket(), "long"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("stopping run long (its state is kept)"));
  d.WaitForState("long", "cancelled", 60);
  CHECK_FALSE(std::filesystem::exists(long_file));
  d.WaitForState("after", "finished", 120);
  r = d.Ctl({"pause", "--socket", d.socket(), "after"});
  CHECK(r.code != 0);
  CHECK_THAT(r.err, Catch::Contains("run 'after' is finished: nothing to pause"));

  // A command on the state directory, which the daemon names.
  const std::string out = d.tmp() / "after.pt";
  r = d.Ctl({"export", "--socket", d.socket(), "after", "--output", out});
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(std::filesystem::file_size(out) > 0);
  st = StatusOf(d, "after");
  REQUIRE(st.is_object());
  CHECK(st["finished"] == true);
  CHECK(st["served"]["state"] == "finished");
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
