// `ensembled serve` end to end (the real ensembled, ensemblectl and ensemble-worker): runs as
// config files, exclusive CPU worker grants, rejected configs with their pointers, priorities,
// submit/list/cancel over the control socket, cancel by removing a file, silent control clients
// that hold nothing up. The daemon's crash:
// tests/serve_crash_test.cpp.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "orchestrator/serve/serve_daemon.h"
#include "common/ipc/control_protocol.h"
#include "support/env_spawn_notify.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

bool Finished(const std::string& state_dir) { return ReplayJournal(JournalOf(state_dir)).finished; }

// The lines of `text`, without '\r' and empty ones.
std::vector<std::string> LinesOf(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

// What the daemon's log relayed of run `name`: each "[run NAME] " line's text after it.
std::vector<std::string> Relayed(const std::string& daemon_log, const std::string& name) {
  std::vector<std::string> out;
  const std::string tag = "[run " + name + "] ";
  for (const std::string& line : LinesOf(daemon_log))
    if (size_t at = line.find(tag); at != std::string::npos) out.push_back(line.substr(at + tag.size()));
  return out;
}

std::vector<std::string> StartOrder(const ServeDaemonHarness& d) {
  std::vector<std::string> out;
  for (const auto& r : QueueEvents(d.QueueJournal(), "started")) out.push_back(r["run"].get<std::string>());
  return out;
}

TEST_CASE("a run config without state_dir gets state_root/run_name - its other errors stay", "[serve]") {
  Config c;
  auto errors = ValidateServedRunConfig(TinyRunConfig("tiny"), "/etc/runs.d", "/var/lib/runs", &c);
  REQUIRE(errors.empty());
  CHECK(c.state_dir == "/var/lib/runs/tiny");
  errors = ValidateServedRunConfig(TinyRunConfig("tiny", 2, 1, R"("state_dir": "here",)"), "/etc/runs.d", "/x", &c);
  REQUIRE(errors.empty());
  CHECK(c.state_dir == "/etc/runs.d/here");
  errors = ValidateServedRunConfig(TinyRunConfig("tiny", 0, 0), "/etc/runs.d", "/x", &c);
  REQUIRE(errors.size() == 2);  // and no "/state_dir: is required"
  CHECK(errors[0].pointer == "/resources/cpu_workers");
  CHECK(errors[1].pointer == "/rounds/count");
}

TEST_CASE("the effective config of a served run reads back as the same config with absolute paths", "[serve]") {
  auto example = LoadConfigFile(std::string(ENS_SOURCE_DIR) + "/configs/example.json");
  REQUIRE(example.ok());
  Config csv;
  REQUIRE(ValidateServedRunConfig(R"({"run_name": "c", "data": {"source": "csv", "train_path": "d/train.csv",
      "target_column": "y"}, "members": {"count": 2, "defaults": {"layers": [{"units": 4}]}}, "rounds": {"count": 1, "stop_below_error": 0.5}})",
                                  "/etc/runs.d", "/var/runs", &csv).empty());
  for (const Config* c : {&*example, &csv}) {
    auto text = EffectiveConfigText(*c);
    INFO((text.ok() ? *text : text.status().message()));
    REQUIRE(text.ok());
    Config back;
    REQUIRE(ValidateConfigText(*text, "/elsewhere", &back).empty());
    CHECK(ConfigToJson(back) == ConfigToJson(*c));
  }
  CHECK(csv.data.train_path == "/etc/runs.d/d/train.csv");
}

// The daemon's loop never waits on a control client (ControlSocket): with 20 connections that
// say nothing, a run config dropped into runs_dir is queued at once and `list` is answered.
TEST_CASE("twenty silent control connections delay neither a dropped run nor ensemblectl list",
          "[serve][integration][control]") {
  ServeDaemonHarness d(2);
  d.Start();
  std::vector<int> silent;
  for (int i = 0; i < 20; ++i) silent.push_back(ConnectUnix(d.socket()));
  for (int fd : silent) REQUIRE(fd >= 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // accepted and waited on

  WriteText(d.runs_dir() + "/.a.json.tmp", TinyRunConfig("a"));
  auto dropped = SteadyClock::now();
  std::filesystem::rename(d.runs_dir() + "/.a.json.tmp", d.runs_dir() + "/a.json");
  double queued_s = -1;
  while (SecondsSince(dropped) < 5) {
    if (!QueueEvents(d.QueueJournal(), "submitted").empty()) {
      queued_s = SecondsSince(dropped);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto t0 = SteadyClock::now();
  TimedRun list = d.Ctl({"list", "--socket", d.socket(), "--json"});
  double list_ms = SecondsSince(t0) * 1000;
  INFO("queued after " << queued_s << " s; list took " << list_ms << " ms: " << list.out << list.err);
  INFO("daemon log:\n" << d.DaemonLog());
  CHECK(queued_s >= 0);
  CHECK(queued_s < 1);
  CHECK(list.code == 0);
  CHECK(list.out.find("\"a\"") != std::string::npos);
  CHECK(list_ms < 500);
  for (int fd : silent) ::close(fd);
  d.WaitForState("a", "finished", 90);
  CHECK(d.Stop() == 0);
}

TEST_CASE("three runs asking 2 CPU workers each on a daemon with 2 run one at a time and all finish",
          "[serve][integration]") {
  ServeDaemonHarness d(2);
  for (const char* name : {"a", "b", "c"}) WriteText(d.runs_dir() + "/" + name + ".json", TinyRunConfig(name));
  d.Start();
  size_t most_children = 0, most_running = 0;
  d.WaitUntil(
      [&] {
        most_children = std::max(most_children, d.RunChildren().size());
        json runs = d.ListRuns();
        if (runs.is_discarded()) return false;
        size_t running = 0, finished = 0;
        for (const auto& r : runs) {
          running += r["state"] == "running" ? 1 : 0;
          finished += r["state"] == "finished" ? 1 : 0;
        }
        most_running = std::max(most_running, running);
        return finished == 3;
      },
      100, "three runs finished");
  CHECK(most_children == 1);
  CHECK(most_running == 1);
  // The queue journal agrees: each run ended before the next started, oldest first.
  auto recs = ReadJournal(d.QueueJournal());
  REQUIRE(recs.ok());
  std::vector<std::string> sequence;
  for (const auto& r : *recs)
    if (r["event"] == "started" || r["event"] == "ended") sequence.push_back(r["event"].get<std::string>() + " " + r["run"].get<std::string>());
  CHECK(sequence == std::vector<std::string>{"started a", "ended a", "started b", "ended b", "started c", "ended c"});
  for (const char* name : {"a", "b", "c"}) {
    INFO(name);
    CHECK(Finished(d.StateDir(name)));
    CHECK_THAT(ReadText(d.StateDir(name) + "/serve.log"), Catch::Contains("run finished") || Catch::Contains("round"));
    json r = d.Run(name);
    CHECK(r["cpu_workers"] == 2);
    CHECK(r["rounds_done"] == 1);
  }
  // A served run's members are the bits of the same config run alone.
  WriteText(d.tmp() / "alone.json", TinyRunConfig("a", 2, 1, "\"state_dir\": \"" + d.tmp() / "alone" + "\","));
  auto alone = RunEnsembled(d.tmp() / "alone.json", d.tmp().path(), {}, 90);
  REQUIRE(alone.code == 0);
  auto diffs = CompareRuns(d.tmp() / "alone", d.StateDir("a"), 1, 2, d.tmp().path(), CompareMode::kBytes);
  INFO(Joined(diffs));
  CHECK(diffs.empty());
  CHECK(d.Stop() == 0);
}

TEST_CASE("a run's output goes whole to its serve.log and line by line, prefixed, to the daemon's log - while the daemon stops too",
          "[serve][integration]") {
  ServeDaemonHarness d(2);
  WriteText(d.runs_dir() + "/chatty.json", TinyRunConfig("chatty", 2, 3, R"("stop_timeout_s": 30,)", 40, 5));
  d.Start();
  d.WaitForState("chatty", "running", 20);
  d.WaitUntil([&] { return CountEvents(JournalOf(d.StateDir("chatty")), "member_done") >= 1; }, 60, "a member of chatty");
  CHECK(d.Stop() == 0);  // SIGTERM: the run stops gracefully, and says so after the daemon's signal
  const std::string log = ReadText(d.StateDir("chatty") + "/serve.log");
  const std::string daemon_log = d.DaemonLog();
  INFO("daemon log:\n" << daemon_log);
  std::vector<std::string> relayed = Relayed(daemon_log, "chatty");
  CHECK(relayed.size() >= 5);
  CHECK(relayed == LinesOf(log));
  CHECK_THAT(log, Catch::Contains("signal 15"));
  // Its last line came after the daemon took the SIGTERM: it was read while the daemon stopped.
  size_t signal_at = daemon_log.find("signal 15: stopping 1 run(s)");
  REQUIRE(signal_at != std::string::npos);
  REQUIRE_FALSE(relayed.empty());
  CHECK(daemon_log.rfind("[run chatty] " + relayed.back()) > signal_at);
  CHECK(daemon_log.find("[run chatty] " + relayed.back()) < daemon_log.find("stopped; the queue is in"));
}

TEST_CASE("a bad config is rejected with every error and its pointer while the others run", "[serve][integration]") {
  ServeDaemonHarness d(2);
  WriteText(d.runs_dir() + "/good.json", TinyRunConfig("good"));
  WriteText(d.runs_dir() + "/bad.json", TinyRunConfig("bad", 0, 0));
  WriteText(d.runs_dir() + "/big.json", TinyRunConfig("big", 3));          // more CPU workers than the daemon has
  WriteText(d.runs_dir() + "/twin.json", TinyRunConfig("good", 1));        // a second "good"
  WriteText(d.runs_dir() + "/.hidden.json", "not even JSON");              // ignored
  WriteText(d.runs_dir() + "/notes.txt", "not a run");                     // ignored
  d.Start();
  d.WaitForState("good", "finished", 90);
  json runs = d.ListRuns();
  INFO(runs.dump(2));
  REQUIRE(runs.size() == 4);
  json bad = d.Run("bad");
  CHECK(bad["state"] == "rejected");
  REQUIRE(bad["errors"].size() == 2);
  CHECK(bad["errors"][0]["pointer"] == "/resources/cpu_workers");
  CHECK(bad["errors"][1]["pointer"] == "/rounds/count");
  json big = d.Run("big");
  CHECK(big["state"] == "rejected");
  CHECK(big["errors"][0]["pointer"] == "/resources/cpu_workers");
  CHECK(big["errors"][0]["message"] == "asks 3 CPU workers; this daemon has 2");
  bool twin_refused = false;
  for (const auto& r : runs)
    if (r["file"].get<std::string>().find("twin.json") != std::string::npos) {
      CHECK(r["state"] == "rejected");
      CHECK(r["errors"][0]["pointer"] == "/run_name");
      twin_refused = true;
    }
  CHECK(twin_refused);
  // The text listing shows every error under its run.
  auto text = d.Ctl({"list", "--socket", d.socket()});
  REQUIRE(text.code == 0);
  CHECK_THAT(text.out, Catch::Contains("/rounds/count: must be an integer >= 1"));
  // A fixed file is taken.
  WriteText(d.runs_dir() + "/bad.json", TinyRunConfig("bad"));
  d.WaitForState("bad", "finished", 90);
  CHECK(Finished(d.StateDir("bad")));
  CHECK(d.Stop() == 0);
}

TEST_CASE("ensemblectl submit with priorities: a later, higher-priority run starts first", "[serve][integration]") {
  ServeDaemonHarness d(2);
  d.Start();
  // "first" holds both workers a while (more members, more epochs) while the others queue.
  WriteText(d.tmp() / "in/first.json", TinyRunConfig("first", 2, 1, "", 6, 20));
  WriteText(d.tmp() / "in/low.json", TinyRunConfig("low"));
  WriteText(d.tmp() / "in/high.json", TinyRunConfig("high"));
  auto s = d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "in/first.json"});
  INFO(s.out << s.err);
  REQUIRE(s.code == 0);
  CHECK_THAT(s.out, Catch::Contains("submitted run first"));
  d.WaitForState("first", "running", 20);
  REQUIRE(d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "in/low.json"}).code == 0);
  REQUIRE(d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "in/high.json", "--priority", "5"}).code == 0);
  json low = d.Run("low");
  if (d.StateOf("first") == "running") {  // (first may finish meanwhile on a fast machine)
    CHECK(low["state"] == "queued");
    CHECK(low["reason"] == "needs 2 CPU workers, 0 free");
  }
  CHECK(d.Run("high")["priority"] == 5);
  CHECK(std::filesystem::exists(d.runs_dir() + "/high.json"));  // submit puts the config in runs_dir
  // A second submission of a name in the queue is refused.
  auto again = d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "in/low.json"});
  CHECK(again.code != 0);
  CHECK_THAT(again.err, Catch::Contains("/run_name"));
  d.WaitUntil([&] { return d.StateOf("low") == "finished" && d.StateOf("high") == "finished"; }, 120, "all finished");
  CHECK(StartOrder(d) == std::vector<std::string>{"first", "high", "low"});
  CHECK(d.Stop() == 0);
}

TEST_CASE("cancel: a queued run by ensemblectl, another by removing its file, a running one gracefully",
          "[serve][integration]") {
  ServeDaemonHarness d(2);
  // Long enough to be cancelled while it trains: many short members, one at a time per worker.
  WriteText(d.runs_dir() + "/long.json", TinyRunConfig("long", 2, 3, R"("stop_timeout_s": 30,)", 40, 5));
  d.Start();
  d.WaitForState("long", "running", 20);
  WriteText(d.runs_dir() + "/byfile.json", TinyRunConfig("byfile"));
  WriteText(d.tmp() / "in/byctl.json", TinyRunConfig("byctl"));
  REQUIRE(d.Ctl({"submit", "--socket", d.socket(), d.tmp() / "in/byctl.json"}).code == 0);
  d.WaitForState("byfile", "queued", 20);

  auto c = d.Ctl({"cancel", "--socket", d.socket(), "byctl"});
  INFO(c.out << c.err);
  REQUIRE(c.code == 0);
  CHECK(d.StateOf("byctl") == "cancelled");
  CHECK_FALSE(std::filesystem::exists(d.runs_dir() + "/byctl.json"));
  std::filesystem::remove(d.runs_dir() + "/byfile.json");
  d.WaitForState("byfile", "cancelled", 20);
  CHECK_THAT(d.Run("byfile")["reason"].get<std::string>(), Catch::Contains("was removed"));

  // The running run: wait until it has trained something, then cancel it.
  d.WaitUntil([&] { return CountEvents(JournalOf(d.StateDir("long")), "member_done") >= 1; }, 60, "a member of long");
  std::vector<pid_t> children = d.RunChildren();
  REQUIRE(children.size() == 1);
  std::string run_id = RunIdOf(d.StateDir("long"));
  c = d.Ctl({"cancel", "--socket", d.socket(), "long"});
  REQUIRE(c.code == 0);
  d.WaitForState("long", "cancelled", 60);
  auto recs = JournalOf(d.StateDir("long"));
  CHECK(CountEvents(recs, "run_started") == 1);  // its state is kept ...
  CHECK(CountEvents(recs, "run_finished") == 0);  // ... unfinished
  CHECK_FALSE(IsLive(children[0]));
  CHECK(LeftoversOf(run_id).empty());
  CHECK_THAT(ReadText(d.StateDir("long") + "/serve.log"), Catch::Contains("signal 15"));
  // Cancelling what is no longer queued or running is refused.
  auto again = d.Ctl({"cancel", "--socket", d.socket(), "long"});
  CHECK(again.code != 0);
  CHECK_THAT(again.err, Catch::Contains("no queued or running run named 'long'"));
  // Nothing restarted what was cancelled, and the daemon idles with no child.
  CHECK(d.RunChildren().empty());
  CHECK(QueueEvents(d.QueueJournal(), "started").size() == 1);
  CHECK(d.Stop() == 0);
}

TEST_CASE("another uid cannot use any command of the protocol table marked as the submitter's - its submitter can",
          "[serve][integration][uid]") {
  if (::geteuid() != 0) {
    std::printf("[serve] skipped: commands as another user need root (to run ensemblectl as nobody)\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  ServeDaemonHarness d(2);
  WriteText(d.runs_dir() + "/mine.json", TinyRunConfig("mine", 2, 2, "", 40, 5));
  d.Start();
  d.WaitForState("mine", "running", 20);
  // The daemon's group may connect (0660); nobody is in no group of ours: let it reach the socket.
  ::chmod(d.tmp().path().c_str(), 0711);
  ::chmod(d.socket().c_str(), 0666);
  std::string out = d.tmp() / "nobody.out", err = d.tmp() / "nobody.err";
  auto as_nobody = [&](std::vector<std::string> argv) {
    for (const std::string& f : {out, err}) {
      WriteText(f, "");
      ::chmod(f.c_str(), 0666);
    }
    std::vector<char*> args = NullTerminated(argv);
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(126);
      ExecRedirected(args.data(), nullptr, out.c_str(), err.c_str());
    }
    return WaitAtMost(pid, 30);
  };
  // Every command the protocol's table gives the submitter (common/ipc/control_protocol.h):
  // a command added there is tried here without a line of this test changing.
  int tried = 0;
  for (const ControlCommandInfo& info : kControlCommands) {
    if (info.access != CommandAccess::kSubmitter) continue;
    ++tried;
    int code = as_nobody({BinaryPath("ensemblectl"), info.name, "--socket", d.socket(), "mine"});
    INFO(info.name << ": " << ReadText(err));
    CHECK(code == 78);
    CHECK_THAT(ReadText(err), Catch::Contains("was submitted by uid 0; only that user or root may " +
                                              std::string(info.name) + " it"));
  }
  CHECK(tried >= 5);  // stop, pause, resume, reload, cancel at least
  // Listing is anyone's.
  CHECK(as_nobody({BinaryPath("ensemblectl"), "list", "--socket", d.socket()}) == 0);
  CHECK_THAT(ReadText(out), Catch::Contains("mine"));
  CHECK(d.StateOf("mine") == "running");
  auto mine = d.Ctl({"cancel", "--socket", d.socket(), "mine"});  // root, the file's owner
  CHECK(mine.code == 0);
  d.WaitForState("mine", "cancelled", 60);
  CHECK(d.Stop() == 0);
}

TEST_CASE("validate-config accepts a served run's config without state_dir as submit does, and names its other errors",
          "[serve][config]") {
  TempDir tmp;
  WriteText(tmp / "served.json", TinyRunConfig("served"));
  auto ok = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "served.json"}, tmp.path());
  INFO(ok.out << ok.err);
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("for `ensembled serve`: no state_dir, the daemon gives it <state_root>/served"));
  WriteText(tmp / "bad.json", TinyRunConfig("bad", 0));
  auto bad = Run({BinaryPath("ensemblectl"), "validate-config", tmp / "bad.json"}, tmp.path());
  CHECK(bad.code == 78);
  CHECK_THAT(bad.out, Catch::Contains("/resources/cpu_workers"));
  CHECK(bad.out.find("/state_dir") == std::string::npos);
}

}  // namespace
}  // namespace ens
