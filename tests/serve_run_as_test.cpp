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

#include "common/journal.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

constexpr const char* kCaps = "+setuid,+setgid,+chown,+dac_read_search,+kill";  // the unit's AmbientCapabilities

void SkipUnlessRunnable() {
  std::string missing;
  if (::geteuid() != 0) missing = "root";
  for (const char* tool : {"/usr/sbin/useradd", "/usr/sbin/userdel", "/usr/bin/setpriv", "/usr/bin/unshare"})
    if (::access(tool, X_OK) != 0) missing += std::string(missing.empty() ? "" : ", ") + tool;
  if (!missing.empty()) {
    std::printf("skipped: needs %s\n", missing.c_str());
    std::fflush(stdout);
    std::_Exit(77);
  }
}

int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

// A daemon user (its own group) and three submitters, each with a group of its own: alice and
// bob in the daemon's group, carol not. Names carry this process's id: concurrent runs of the
// test do not clash. useradd may find /etc/passwd locked by another one: retried.
class TestUsers {
 public:
  TestUsers() : tag_(std::to_string(::getpid())) {
    Add(daemon(), "");
    Add(alice(), daemon());
    Add(bob(), daemon());
    Add(carol(), "");
  }
  ~TestUsers() {
    for (const std::string& u : made_) {
      for (int i = 0; i < 20 && Sh("userdel " + u + " 2>/dev/null") != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Sh("groupdel " + u + " 2>/dev/null");
    }
  }
  std::string daemon() const { return "ens-d" + tag_; }
  std::string alice() const { return "ens-a" + tag_; }
  std::string bob() const { return "ens-b" + tag_; }
  std::string carol() const { return "ens-c" + tag_; }
  static uid_t Uid(const std::string& name) { return ::getpwnam(name.c_str())->pw_uid; }
  static gid_t Gid(const std::string& name) { return ::getpwnam(name.c_str())->pw_gid; }
  // argv run as `user` with its groups and no capability.
  static std::vector<std::string> As(const std::string& user, std::vector<std::string> argv) {
    std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

 private:
  void Add(const std::string& user, const std::string& also_in) {
    std::string cmd = "useradd -r -M -U -s /usr/sbin/nologin" + (also_in.empty() ? "" : " -G " + also_in) + " " + user;
    int rc = 1;
    for (int i = 0; i < 20 && (rc = Sh(cmd)) != 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    REQUIRE(rc == 0);
    made_.push_back(user);
  }
  std::string tag_;
  std::vector<std::string> made_;
};

// The daemon, as the daemon user with the unit's capabilities, in a mount namespace where
// /root is a 0755 tmpfs holding /root/.cache (the workers' libtorch).
class RunAsDaemon {
 public:
  RunAsDaemon(const TestUsers& users, const std::string& serve_extra) : users_(users) {
    REQUIRE(::chmod(tmp_.path().c_str(), 0755) == 0);
    REQUIRE(::chown(tmp_.path().c_str(), TestUsers::Uid(users.daemon()), TestUsers::Gid(users.daemon())) == 0);
    WriteText(tmp_ / "serve.json", R"({"runs_dir": "runs.d", "state_root": "state", "run_as": "submitter", )" +
                                       serve_extra + R"("resources": {"gpus": "none", "cpu_workers": 2},
      "service": {"control_socket": ")" + socket() + "\"}}");
  }
  ~RunAsDaemon() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      Wait(pid_);
    }
  }
  // The command line; `caps`: the capabilities it gets ("" none).
  std::vector<std::string> Command(const std::string& caps) const {
    const std::string view = tmp_ / "rootview";
    std::string priv = "/usr/bin/setpriv --reuid=" + users_.daemon() + " --regid=" + users_.daemon() + " --init-groups";
    if (!caps.empty()) priv += std::string(" --inh-caps=") + caps + " --ambient-caps=" + caps;
    std::string script = "set -e; mkdir -p " + view + "; mount -t tmpfs -o mode=0755 tmpfs " + view + "; mkdir " +
                         view + "/.cache; mount --bind /root/.cache " + view + "/.cache; mount --rbind " + view +
                         " /root; exec " + priv + " " + BinaryPath("ensembled") + " serve --config " + tmp_ / "serve.json";
    return {"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script};
  }
  void Start() {
    pid_ = SpawnEnv(Command(kCaps), scratch_ / "daemon.out", scratch_ / "daemon.err");
    auto t0 = SteadyClock::now();
    while (Ctl("root", {"list", "--socket", socket(), "--json"}).code != 0) {
      if (SecondsSince(t0) > 20 || TryWait(pid_)) {
        pid_ = -1;
        FAIL("the daemon did not answer: " << Log());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int Stop() {
    ::kill(pid_, SIGTERM);
    int code = WaitAtMost(pid_, 60);
    pid_ = -1;
    return code;
  }
  // `ensemblectl args` as `user` ("root": as this test).
  TimedRun Ctl(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), BinaryPath("ensemblectl"));
    return RunWithEnv(user == "root" ? args : TestUsers::As(user, args), scratch_.path(), {}, 30);
  }
  json Runs() {
    TimedRun r = Ctl("root", {"list", "--socket", socket(), "--json"});
    json j = json::parse(r.out, nullptr, false);
    return j.is_object() ? j.value("runs", json::array()) : json::array();
  }
  json Run(const std::string& name) {
    for (const json& r : Runs())
      if (r.value("name", "") == name) return r;
    return nullptr;
  }
  void WaitFor(const std::string& name, const std::function<bool(const json&)>& done, const std::string& what) {
    auto t0 = SteadyClock::now();
    for (json r = Run(name); !(r.is_object() && done(r)); r = Run(name)) {
      if (SecondsSince(t0) > 180) FAIL("run " << name << " not " << what << ": " << r.dump() << "\n" << Log());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::string Log() const { return ReadText(scratch_ / "daemon.err"); }
  std::string socket() const { return tmp_ / "s.sock"; }
  std::string runs_dir() const { return tmp_ / "runs.d"; }
  std::string StateDir(const std::string& run) const { return tmp_ / ("state/" + run); }
  std::string ServeDir() const { return tmp_ / "state/.serve"; }
  const TempDir& tmp() const { return tmp_; }
  const TempDir& scratch() const { return scratch_; }

 private:
  const TestUsers& users_;
  TempDir tmp_;      // the daemon's (runs.d, state, socket), 0755
  TempDir scratch_;  // this test's (outputs), root's
  pid_t pid_ = -1;
};

std::string StatusUid(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Uid:", 0) == 0) return line.substr(4);
  return "";
}

struct stat StatOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

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
