// Tests of `ensembled serve` with run_as "submitter" (orchestrator/serve/serve_run_as.cpp,
// docs/run-as.md), with real users: the test makes a daemon user and three submitters (names
// unique to this process, removed at the end), starts the daemon as the daemon user with only
// the capabilities the unit grants (setpriv), and has each user submit with `ensemblectl` as
// that user. Needs root, useradd, setpriv and unshare (the daemon sees /root/.cache, where the
// workers' libtorch is, through a mount namespace of its own: /root itself is 0700); otherwise
// skipped (SKIP_RETURN_CODE).
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/state/journal.h"
#include "support/run_as_harness.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

TEST_CASE("runs run as their submitters, and one submitter cannot read, stop or write into another's run",
          "[serve][run_as]") {
  SkipUnlessRunnable();
  TestUsers users;
  RunAsDaemon d(users, "");
  d.Start();
  const uid_t alice = TestUsers::Uid(users.alice()), bob = TestUsers::Uid(users.bob());

  // Alice's run: long enough to be seen running.
  WriteText(d.scratch() / "alice.json", TinyRunConfig("alice-run", 1, 6, "", 2, 40));
  REQUIRE(::chmod(d.scratch().path().c_str(), 0755) == 0);
  TimedRun sub = d.Ctl(users.alice(), {"submit", "--socket", d.socket(), d.scratch() / "alice.json"});
  INFO(sub.out << sub.err << d.Log());
  REQUIRE(sub.code == 0);
  json running = nullptr;
  d.WaitFor("alice-run", [&](const json& r) { running = r; return r.value("state", "") != "queued"; }, "started");
  REQUIRE(running.value("state", "") == "running");
  // Its `ensembled run` runs as alice: real, effective, saved and filesystem uid.
  const std::string a = std::to_string(alice);
  CHECK(StatusUid(running["pid"].get<pid_t>()) == "\t" + a + "\t" + a + "\t" + a + "\t" + a);

  // Bob may list it, but not read, stop or cancel it; alice may.
  TimedRun status = d.Ctl(users.bob(), {"status", "--socket", d.socket(), "alice-run"});
  CHECK(status.code != 0);
  CHECK_THAT(status.out + status.err, Catch::Contains("only that user or root may status it"));
  for (const char* verb : {"stop", "cancel", "pause"}) {
    TimedRun r = d.Ctl(users.bob(), {verb, "--socket", d.socket(), "alice-run"});
    INFO(verb << ": " << r.out << r.err);
    CHECK(r.code != 0);
    CHECK_THAT(r.out + r.err, Catch::Contains("only that user or root may " + std::string(verb)));
  }
  // Alice's own: the daemon reaches her run's supervisor on its socket in her state directory.
  TimedRun own;
  auto answered = [&] {
    own = d.Ctl(users.alice(), {"status", "--socket", d.socket(), "alice-run", "--json"});
    json j = json::parse(own.out, nullptr, false);
    return own.code == 0 && j.is_object() && j.contains("live") && j["live"].is_object();
  };
  auto t0 = SteadyClock::now();
  while (!answered() && SecondsSince(t0) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  INFO(own.out << own.err);
  CHECK(answered());
  for (const char* verb : {"pause", "resume", "reload"}) {
    TimedRun r = d.Ctl(users.alice(), {verb, "--socket", d.socket(), "alice-run"});
    INFO(verb << ": " << r.out << r.err);
    CHECK(r.code == 0);
  }
  CHECK(d.Ctl(users.bob(), {"list", "--socket", d.socket()}).code == 0);

  // Bob's run: its mutation command tries to write into alice's state directory and records
  // what happened in its own ($HOME is its state directory).
  const std::string alice_dir = d.StateDir("alice-run");
  WriteText(d.scratch() / "intrude.sh", "#!/bin/sh\ncat >/dev/null\n"
            "if (echo bob > " + alice_dir + "/intruder.txt) 2>\"$HOME/intrusion.err\"; then r=wrote; else r=refused; fi\n"
            "echo \"$r uid=$(id -u)\" > \"$HOME/intrusion.txt\"\n"
            "ls " + alice_dir + " >/dev/null 2>>\"$HOME/intrusion.err\" || true\necho '{}'\n");
  REQUIRE(::chmod((d.scratch() / "intrude.sh").c_str(), 0755) == 0);
  std::string bob_cfg = TinyRunConfig("bob-run", 1, 2);
  const std::string pool = R"("mutation": {"policy": "append_from_pool", "k": 10})";
  bob_cfg.replace(bob_cfg.find(pool), pool.size(),
                  R"("mutation": {"policy": "command", "argv": [")" + d.scratch() / "intrude.sh" + R"("], "k": 2, "timeout_s": 30})");
  WriteText(d.scratch() / "bob.json", bob_cfg);
  sub = d.Ctl(users.bob(), {"submit", "--socket", d.socket(), d.scratch() / "bob.json"});
  INFO(sub.out << sub.err);
  REQUIRE(sub.code == 0);

  // Data is read as the submitter: alice's run cannot read bob's 0600 file (the daemon could).
  const std::string bob_data = d.scratch() / "bobdata";
  std::filesystem::create_directories(bob_data);
  std::string csv = "x,y\n";
  for (int i = 0; i < 40; ++i) csv += std::to_string(i) + "," + std::to_string(2 * i) + "\n";
  WriteText(bob_data + "/train.csv", csv);
  REQUIRE(::chmod((bob_data + "/train.csv").c_str(), 0600) == 0);
  REQUIRE(::chown((bob_data + "/train.csv").c_str(), bob, TestUsers::Gid(users.bob())) == 0);
  WriteText(d.scratch() / "peek.json", R"({"run_name": "peek-run", "resources": {"gpus": "none", "cpu_workers": 1},
      "data": {"source": "csv", "train_path": ")" + bob_data + R"(/train.csv", "target_column": "y"},
      "members": {"defaults": {"layers": [{"units": 4}]}, "count": 1}})");
  sub = d.Ctl(users.alice(), {"submit", "--socket", d.socket(), d.scratch() / "peek.json"});
  INFO(sub.out << sub.err);
  REQUIRE(sub.code == 0);

  // A file dropped by a user outside the daemon's group, and one by root: rejected, saying why.
  // (Owned by carol before it is in runs_dir: moved in, as a user's own file would be.)
  WriteText(d.runs_dir() + "/.carol.tmp", TinyRunConfig("carol-run"));
  REQUIRE(::chown((d.runs_dir() + "/.carol.tmp").c_str(), TestUsers::Uid(users.carol()), TestUsers::Gid(users.carol())) == 0);
  REQUIRE(::rename((d.runs_dir() + "/.carol.tmp").c_str(), (d.runs_dir() + "/carol.json").c_str()) == 0);
  WriteText(d.runs_dir() + "/rooted.json", TinyRunConfig("rooted-run"));
  TimedRun carol = d.Ctl(users.carol(), {"submit", "--socket", d.socket(), d.scratch() / "alice.json"});
  CHECK(carol.code != 0);  // the daemon's socket is 0660: carol cannot even connect
  REQUIRE(::chmod(d.socket().c_str(), 0666) == 0);  // and when she can, the daemon refuses her
  carol = d.Ctl(users.carol(), {"submit", "--socket", d.socket(), d.scratch() / "alice.json"});
  CHECK(carol.code != 0);
  CHECK_THAT(carol.out + carol.err, Catch::Contains("is not in group " + users.daemon()));
  TimedRun rooted = d.Ctl("root", {"submit", "--socket", d.socket(), d.scratch() / "bob.json"});
  CHECK(rooted.code != 0);
  CHECK_THAT(rooted.out + rooted.err, Catch::Contains("(root) may not submit"));

  d.WaitFor("alice-run", [](const json& r) { return r.value("state", "") == "finished"; }, "finished");
  d.WaitFor("bob-run", [](const json& r) { return r.value("state", "") == "finished"; }, "finished");
  // Data its submitter may not read fails the run at once (exit 78), with the reason: no retries.
  d.WaitFor("peek-run", [&](const json& r) {
    return r.value("state", "") == "failed" &&
           r.value("reason", "").find(bob_data + "/train.csv: Permission denied") != std::string::npos;
  }, "failed on bob's data");
  CHECK(d.Run("peek-run").value("crashes", 0) == 0);
  d.WaitFor("carol-run", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
  CHECK_THAT(d.Run("carol-run").value("reason", ""), Catch::Contains("is not in group " + users.daemon()));
  d.WaitFor("rooted-run", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
  CHECK_THAT(d.Run("rooted-run").value("reason", ""), Catch::Contains("allow_root"));

  // Each state directory is its submitter's, 0750, and so is what the run wrote there.
  struct stat st = StatOf(alice_dir);
  CHECK(st.st_uid == alice);
  CHECK(st.st_gid == TestUsers::Gid(users.alice()));
  CHECK((st.st_mode & 07777) == 0750);
  CHECK(StatOf(alice_dir + "/journal.jsonl").st_uid == alice);
  CHECK(StatOf(d.StateDir("bob-run") + "/journal.jsonl").st_uid == bob);
  // The relayed log and the effective config stay the daemon's, readable by the submitter's group.
  struct stat log = StatOf(d.ServeDir() + "/logs/alice-run.log");
  CHECK(log.st_gid == TestUsers::Gid(users.alice()));
  CHECK((log.st_mode & 0777) == 0640);
  struct stat config = StatOf(d.ServeDir() + "/configs/alice-run.json");  // rewritten by the reload
  CHECK(config.st_gid == TestUsers::Gid(users.alice()));
  CHECK((config.st_mode & 0777) == 0640);

  // Bob cannot read alice's state directory (EACCES), nor her log; alice can.
  TimedRun peek = RunWithEnv(TestUsers::As(users.bob(), {"cat", alice_dir + "/journal.jsonl"}), d.scratch().path());
  CHECK(peek.code != 0);
  CHECK_THAT(peek.err, Catch::Contains("Permission denied"));
  TimedRun list_dir = RunWithEnv(TestUsers::As(users.bob(), {"ls", alice_dir}), d.scratch().path());
  CHECK_THAT(list_dir.err, Catch::Contains("Permission denied"));
  TimedRun peek_log = RunWithEnv(TestUsers::As(users.bob(), {"cat", d.ServeDir() + "/logs/alice-run.log"}), d.scratch().path());
  CHECK_THAT(peek_log.err, Catch::Contains("Permission denied"));
  TimedRun peek_cfg = RunWithEnv(TestUsers::As(users.bob(), {"cat", d.runs_dir() + "/alice-run.json"}), d.scratch().path());
  CHECK_THAT(peek_cfg.err, Catch::Contains("Permission denied"));
  CHECK(RunWithEnv(TestUsers::As(users.alice(), {"cat", alice_dir + "/journal.jsonl"}), d.scratch().path()).code == 0);
  CHECK(RunWithEnv(TestUsers::As(users.alice(), {"cat", d.ServeDir() + "/logs/alice-run.log"}), d.scratch().path()).code == 0);

  // Bob's mutation command ran as bob and could not write into alice's state directory.
  const std::string bob_dir = d.StateDir("bob-run");
  CHECK(ReadText(bob_dir + "/intrusion.txt") == "refused uid=" + std::to_string(bob) + "\n");
  CHECK_THAT(ReadText(bob_dir + "/intrusion.err"), Catch::Contains(alice_dir + "/intruder.txt: Permission denied"));
  CHECK_FALSE(std::filesystem::exists(alice_dir + "/intruder.txt"));

  // Alice's cancel of a running run reaches its processes, which are hers, not the daemon's
  // (signalling another uid: CAP_KILL): it stops gracefully and is cancelled.
  WriteText(d.scratch() / "long.json", TinyRunConfig("alice-long", 1, 1000, "", 2, 400));  // minutes
  REQUIRE(d.Ctl(users.alice(), {"submit", "--socket", d.socket(), d.scratch() / "long.json"}).code == 0);
  d.WaitFor("alice-long", [](const json& r) { return r.value("state", "") == "running"; }, "running");
  TimedRun stop = d.Ctl(users.alice(), {"cancel", "--socket", d.socket(), "alice-long"});
  INFO(stop.out << stop.err);
  CHECK(stop.code == 0);
  auto cancelled_at = SteadyClock::now();
  d.WaitFor("alice-long", [](const json& r) { return r.value("state", "") == "cancelled"; }, "cancelled");
  CHECK(SecondsSince(cancelled_at) < 20);
  CHECK_FALSE(ReplayJournal(JournalOf(d.StateDir("alice-long"))).finished);
  CHECK(d.Stop() == 0);
}

TEST_CASE("run_as submitter without CAP_SETUID and CAP_SETGID: the daemon does not start, exit 78 naming /run_as",
          "[serve][run_as]") {
  SkipUnlessRunnable();
  TestUsers users;
  RunAsDaemon d(users, "");
  TimedRun r = RunWithEnv(d.Command(""), d.scratch().path(), {}, 30);
  INFO(r.out << r.err);
  CHECK(r.code == 78);
  CHECK_THAT(r.err, Catch::Contains("/run_as: \"submitter\" needs CAP_SETUID, CAP_SETGID") &&
                        Catch::Contains("lacks CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_DAC_READ_SEARCH, CAP_KILL"));
}

}  // namespace
}  // namespace ens
