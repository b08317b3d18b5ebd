// An attacker's tests of `ensembled serve` with run_as "submitter" (docs/security.md): real
// users (tests/support/run_as_harness.h), the daemon as its own user with the unit's
// capabilities. Alice, a submitter, tries every class of attack we know on Bob's run and on the
// daemon, with what any local user has: links (symbolic and hard), FIFOs, renames, replacements
// and removals in runs_dir and in her own state directory, dot and escaping names, socket
// swaps, priorities at the edges, more runs than her share; Carol, a local user who may not
// submit, reads over HTTP. Each is refused with its reason; Bob's run is untouched and
// finishes with the bits of the same run alone; the daemon still answers and restarts.
// Needs root (skipped otherwise, SKIP_RETURN_CODE).
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "common/state/journal.h"
#include "support/env_spawn_notify.h"
#include "support/run_as_harness.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

constexpr const char* kToken = "s3cret-token-for-run-pages";

// `script` run by /bin/sh as `user`; its exit code and output.
TimedRun ShAs(const RunAsDaemon& d, const std::string& user, const std::string& script) {
  return RunWithEnv(TestUsers::As(user, {"/bin/sh", "-c", script}), d.scratch().path(), {}, 30);
}

// A submission refused, its reason containing `why`.
void CheckRefused(const TimedRun& r, const std::string& why) {
  INFO(r.out << r.err);
  CHECK(r.code != 0);
  CHECK_THAT(r.out + r.err, Catch::Contains(why));
}

TEST_CASE("a submitter's attacks on another's run and on the daemon are refused with their reasons - the other run "
          "finishes with the bits of the same run alone", "[serve][run_as][security]") {
  SkipUnlessRunnable();
  TestUsers users;
  const int port = FreeTcpPort();
  RunAsDaemon d(users, std::string(R"("limits": {"max_priority": 10, "runs": 3}, "http_token_file": "token",)"),
                ", \"http_port\": " + std::to_string(port) + ", \"http_bind\": \"127.0.0.1\"");
  WriteText(d.tmp() / "token", std::string(kToken) + "\n");
  REQUIRE(::chown((d.tmp() / "token").c_str(), TestUsers::Uid(users.daemon()), TestUsers::Gid(users.daemon())) == 0);
  REQUIRE(::chmod((d.tmp() / "token").c_str(), 0600) == 0);
  // runs_dir as the unit's tmpfiles.d makes it: the daemon's, its group may write (2775); the
  // daemon makes it sticky as it starts.
  std::filesystem::create_directories(d.runs_dir());
  REQUIRE(::chown(d.runs_dir().c_str(), TestUsers::Uid(users.daemon()), TestUsers::Gid(users.daemon())) == 0);
  REQUIRE(::chmod(d.runs_dir().c_str(), 02775) == 0);
  d.Start();
  CHECK((StatOf(d.runs_dir()).st_mode & 07777) == 03775);
  const std::string alice = users.alice(), bob = users.bob();
  const uid_t bob_uid = TestUsers::Uid(bob), daemon_uid = TestUsers::Uid(users.daemon());
  REQUIRE(::chmod(d.scratch().path().c_str(), 0755) == 0);
  INFO("daemon log:\n" << d.Log());

  // Bob's run, running while Alice attacks: 1 worker, long enough.
  constexpr int kRounds = 2, kMembers = 2, kEpochs = 20000;
  const std::string bob_cfg = TinyRunConfig("bob-run", 1, kRounds, "", kMembers, kEpochs);
  WriteText(d.scratch() / "bob.json", bob_cfg);
  REQUIRE(::chown((d.scratch() / "bob.json").c_str(), bob_uid, TestUsers::Gid(bob)) == 0);
  REQUIRE(d.Ctl(bob, {"submit", "--socket", d.socket(), d.scratch() / "bob.json"}).code == 0);
  d.WaitFor("bob-run", [](const json& r) { return r.value("state", "") == "running"; }, "running");
  const std::string bob_dir = d.StateDir("bob-run"), bob_file = d.runs_dir() + "/bob-run.json";
  // Alice's run: a long one of her own, whose state directory she controls.
  WriteText(d.scratch() / "alice.json", TinyRunConfig("alice-run", 1, 1000, "", 2, 400));
  REQUIRE(d.Ctl(alice, {"submit", "--socket", d.socket(), d.scratch() / "alice.json"}).code == 0);
  d.WaitFor("alice-run", [](const json& r) { return r.value("state", "") == "running"; }, "running");
  const std::string alice_dir = d.StateDir("alice-run");
  auto wait_file = [](const std::string& path) {
    for (int i = 0; i < 200 && !std::filesystem::exists(path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(std::filesystem::exists(path));
  };
  wait_file(alice_dir + "/control.sock");
  wait_file(bob_dir + "/control.sock");

  // 1. Her run's processes: no capability, none to gain (an empty bounding set, no_new_privs).
  // (Bob's run's pid, while it runs: the same child setup as hers.)
  json bob_run = d.Run("bob-run");
  REQUIRE(bob_run.contains("pid"));
  const pid_t bob_pid = bob_run["pid"].get<pid_t>();
  CHECK(ProcStatus(bob_pid, "NoNewPrivs") == "\t1");
  CHECK(ProcStatus(bob_pid, "CapBnd") == "\t0000000000000000");
  CHECK(ProcStatus(bob_pid, "CapEff") == "\t0000000000000000");

  // 2. Her state directory: her control socket swapped for a link to Bob's, then to the
  // daemon's: the daemon does not follow it (Bob's run is not paused, the daemon not asked).
  REQUIRE(ShAs(d, alice, "rm -f " + alice_dir + "/control.sock && ln -s " + bob_dir + "/control.sock " + alice_dir +
                             "/control.sock").code == 0);
  CheckRefused(d.Ctl(alice, {"pause", "--socket", d.socket(), "alice-run"}), "symbolic link (not followed)");
  REQUIRE(ShAs(d, alice, "ln -sfn " + d.socket() + " " + alice_dir + "/control.sock").code == 0);
  CheckRefused(d.Ctl(alice, {"pause", "--socket", d.socket(), "alice-run"}), "symbolic link (not followed)");
  // 3. runs_dir: a link to Bob's config (his run, his uid, her doing), a hard link, a FIFO, a
  // file too large to be a config.
  REQUIRE(ShAs(d, alice, "ln -s " + d.scratch() / "bob.json" + " " + d.runs_dir() + "/evil-link.json").code == 0);
  WriteText(d.scratch() / "bob-open.json", TinyRunConfig("bob-open"));
  REQUIRE(::chown((d.scratch() / "bob-open.json").c_str(), bob_uid, TestUsers::Gid(bob)) == 0);
  REQUIRE(::chmod((d.scratch() / "bob-open.json").c_str(), 0666) == 0);
  TimedRun hard = ShAs(d, alice, "ln " + d.scratch() / "bob-open.json" + " " + d.runs_dir() + "/evil-hard.json");
  REQUIRE(ShAs(d, alice, "mkfifo " + d.runs_dir() + "/evil-fifo.json").code == 0);
  REQUIRE(ShAs(d, alice, "head -c 2000000 /dev/zero > " + d.runs_dir() + "/evil-big.json").code == 0);
  d.WaitFor("evil-link", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
  CHECK_THAT(d.Run("evil-link").value("reason", ""), Catch::Contains("symbolic link (not followed)"));
  if (hard.code == 0) {  // (fs.protected_hardlinks may refuse her the link itself)
    d.WaitFor("evil-hard", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
    CHECK_THAT(d.Run("evil-hard").value("reason", ""), Catch::Contains("has 2 links"));
  }
  d.WaitFor("evil-fifo", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
  CHECK_THAT(d.Run("evil-fifo").value("reason", ""), Catch::Contains("a FIFO, not a regular file"));
  d.WaitFor("evil-big", [](const json& r) { return r.value("state", "") == "rejected"; }, "rejected");
  CHECK_THAT(d.Run("evil-big").value("reason", ""), Catch::Contains("over the limit of 1048576"));
  CHECK(d.Run("bob-open").is_null());

  // 4. Bob's file in runs_dir: not hers to replace, rename or remove (sticky); a link planted
  // where a submission will be written is not written through.
  WriteText(d.scratch() / "mine.json", TinyRunConfig("bob-run"));
  CHECK(ShAs(d, alice, "mv -f " + d.scratch() / "mine.json" + " " + bob_file).code != 0);
  CHECK(ShAs(d, alice, "rm -f " + bob_file).code != 0);
  CHECK(ShAs(d, alice, "mv " + bob_file + " " + d.runs_dir() + "/moved.json").code != 0);
  CHECK(StatOf(bob_file).st_uid == daemon_uid);
  WriteText(d.scratch() / "victim.txt", "untouched\n");
  REQUIRE(::chmod((d.scratch() / "victim.txt").c_str(), 0666) == 0);
  REQUIRE(ShAs(d, alice, "ln -s " + d.scratch() / "victim.txt" + " " + d.runs_dir() + "/planted.json").code == 0);
  WriteText(d.scratch() / "planted.json", TinyRunConfig("planted"));
  CheckRefused(d.Ctl(bob, {"submit", "--socket", d.socket(), d.scratch() / "planted.json"}), "exists already");
  CHECK(ReadText(d.scratch() / "victim.txt") == "untouched\n");

  // 5. Names and state directories that would reach outside a run's own.
  const std::string root = d.tmp() / "state";
  auto submit_as_alice = [&](const std::string& name, const std::string& extra) {
    WriteText(d.scratch() / "a.json", TinyRunConfig(name, 1, 1, extra));
    return d.Ctl(alice, {"submit", "--socket", d.socket(), d.scratch() / "a.json"});
  };
  CheckRefused(submit_as_alice("..", ""), "/run_name");
  CheckRefused(submit_as_alice(".serve", ""), "/run_name");
  CheckRefused(submit_as_alice("a1", "\"state_dir\": \"" + root + "\","), "state_root");
  CheckRefused(submit_as_alice("a2", "\"state_dir\": \"" + root + "/\","), "state_root");
  CheckRefused(submit_as_alice("a3", "\"state_dir\": \"" + d.tmp().path() + "\","), "state_root");
  CheckRefused(submit_as_alice("a4", "\"state_dir\": \"" + root + "/.serve/x\","), "the daemon's own folder");
  CheckRefused(submit_as_alice("a5", "\"state_dir\": \"" + root + "/.serve/\","), "the daemon's own folder");
  CheckRefused(submit_as_alice("a6", "\"state_dir\": \"" + bob_dir + "/\","), "state directory of run bob-run");
  CheckRefused(submit_as_alice("a7", "\"state_dir\": \"" + bob_dir + "/inner\","), "state directory of run bob-run");
  CheckRefused(submit_as_alice("a8", "\"state_dir\": \"" + d.runs_dir() + "\","), "runs_dir");
  CheckRefused(submit_as_alice("a9", "\"state_dir\": \"" + root + "/x/y\","), "not one of its folders");
  // The daemon's own user is never a submitter.
  WriteText(d.scratch() / "daemon.json", TinyRunConfig("daemon-run"));
  CheckRefused(d.Ctl(users.daemon(), {"submit", "--socket", d.socket(), d.scratch() / "daemon.json"}),
               "the daemon's own user");

  // 6. Priorities: within the configured limits only; quotas: three runs of hers at most.
  WriteText(d.scratch() / "p.json", TinyRunConfig("alice-p", 1, 1));
  for (const char* p : {"11", "2147483647", "-2147483648", "99999999999999999999"}) {
    TimedRun r = d.Ctl(alice, {"submit", "--socket", d.socket(), "--priority", p, d.scratch() / "p.json"});
    INFO("priority " << p << ": " << r.out << r.err);
    CHECK(r.code != 0);
    CHECK_THAT(r.out + r.err, Catch::Contains("priority"));
  }
  CheckRefused(d.Ctl(alice, {"submit", "--socket", d.socket(), "--priority", "11", d.scratch() / "p.json"}),
               "/limits/max_priority");
  REQUIRE(submit_as_alice("alice-q2", "").code == 0);
  REQUIRE(submit_as_alice("alice-q3", "").code == 0);
  CheckRefused(submit_as_alice("alice-q4", ""), "/limits/runs");
  CHECK(d.Ctl(alice, {"cancel", "--socket", d.socket(), "alice-q2"}).code == 0);
  CHECK(d.Ctl(alice, {"cancel", "--socket", d.socket(), "alice-q3"}).code == 0);

  // 7. Her journal made a link to a file only root may read, then a FIFO: the daemon reads
  // neither (nothing of /etc/shadow in what it says) and keeps answering.
  REQUIRE(ShAs(d, alice, "rm -f " + alice_dir + "/journal.jsonl && ln -s /etc/shadow " + alice_dir + "/journal.jsonl").code == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  TimedRun listed = d.Ctl(alice, {"list", "--socket", d.socket(), "--json"});
  CHECK(listed.code == 0);
  CHECK(listed.out.find("root:") == std::string::npos);
  REQUIRE(ShAs(d, alice, "rm -f " + alice_dir + "/journal.jsonl && mkfifo " + alice_dir + "/journal.jsonl").code == 0);
  auto t0 = SteadyClock::now();
  listed = d.Ctl(alice, {"list", "--socket", d.socket(), "--json"});
  CHECK(listed.code == 0);
  CHECK(SecondsSince(t0) < 5);
  CHECK(d.Ctl(alice, {"cancel", "--socket", d.socket(), "alice-run"}).code == 0);

  // 8. HTTP, as anyone (Carol cannot even submit): the list, not a run's page, without the token.
  HttpReply front = HttpGet("127.0.0.1", port, "/");
  CHECK(front.status == 200);
  CHECK_THAT(front.body, Catch::Contains("bob-run"));
  HttpReply page = HttpGet("127.0.0.1", port, "/runs/bob-run");
  CHECK(page.status == 401);
  CHECK_THAT(page.body, Catch::Contains("ensemblectl status"));
  HttpReply wrong = HttpGet("127.0.0.1", port, "/runs/bob-run", 5000, "Authorization: Bearer guess\r\n");
  CHECK(wrong.status == 401);
  HttpReply with_token = HttpGet("127.0.0.1", port, "/runs/bob-run", 5000, std::string("Authorization: Bearer ") + kToken + "\r\n");
  CHECK(with_token.status == 200);

  // Bob's run: never paused, finished, every member once, the bits of the same run alone.
  d.WaitFor("bob-run", [](const json& r) { return r.value("state", "") == "finished"; }, "finished");
  CHECK(ReadText(d.ServeDir() + "/logs/bob-run.log").find("paused by ensemblectl") == std::string::npos);
  const auto done = DoneCounts(JournalOf(bob_dir));
  CHECK(done.size() == static_cast<size_t>(kRounds * kMembers));
  for (const auto& [key, n] : done) CHECK(n == 1);
  WriteText(d.scratch() / "alone.json",
            TinyRunConfig("bob-run", 1, kRounds, "\"state_dir\": \"" + d.scratch() / "alone" + "\",", kMembers, kEpochs));
  TimedRun alone = RunEnsembled(d.scratch() / "alone.json", d.scratch().path(), {}, 240);
  REQUIRE(alone.code == 0);
  std::vector<std::string> diffs = CompareRuns(d.scratch() / "alone", bob_dir, kRounds, kMembers, d.scratch().path(),
                                               CompareMode::kBytes);
  INFO(Joined(diffs));
  CHECK(diffs.empty());

  // 9. Bob's run is over: its state directory is still his, never taken over by a run of hers.
  CHECK(submit_as_alice("alice-take", "\"state_dir\": \"" + bob_dir + "\",").code == 0);
  d.WaitFor("alice-take", [](const json& r) { return r.value("state", "") == "failed"; }, "failed");
  CHECK_THAT(d.Run("alice-take").value("reason", ""), Catch::Contains("never taken over"));
  CHECK(StatOf(bob_dir).st_uid == bob_uid);

  // The daemon stops and starts again, its queue whole.
  CHECK(d.Stop() == 0);
  d.Start();
  CHECK(d.Run("bob-run").value("state", "") == "finished");
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
