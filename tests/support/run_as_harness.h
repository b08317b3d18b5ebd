// RunAsHarness: real users and a daemon run as one of them with the unit's capabilities, for
// the tests of `ensembled serve` with run_as "submitter" (serve_run_as_test, serve_attacks_test).
// Needs root, useradd, setpriv and unshare (the daemon sees /root/.cache, where the workers'
// libtorch is, through a mount namespace of its own: /root itself is 0700); SkipUnlessRunnable
// exits 77 (ctest's SKIP_RETURN_CODE) otherwise.
#pragma once

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_harness.h"

namespace ens::testing {

// The unit's AmbientCapabilities (packaging/ensembled.service.in).
inline constexpr const char* kUnitCaps = "+setuid,+setgid,+chown,+dac_read_search,+kill,+setpcap";

inline void SkipUnlessRunnable() {
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

inline int Sh(const std::string& cmd) { return std::system(cmd.c_str()); }

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
  // `serve_extra`: more top-level keys of the serve config, each followed by a comma;
  // `service_extra`: more of its "service" (", \"http_port\": 9000").
  RunAsDaemon(const TestUsers& users, const std::string& serve_extra, const std::string& service_extra = "")
      : users_(users) {
    REQUIRE(::chmod(tmp_.path().c_str(), 0755) == 0);
    REQUIRE(::chown(tmp_.path().c_str(), TestUsers::Uid(users.daemon()), TestUsers::Gid(users.daemon())) == 0);
    WriteText(tmp_ / "serve.json", R"({"runs_dir": "runs.d", "state_root": "state", "run_as": "submitter", )" +
                                       serve_extra + R"("resources": {"gpus": "none", "cpu_workers": 2},
      "service": {"control_socket": ")" + socket() + "\"" + service_extra + "}}");
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
    pid_ = SpawnEnv(Command(kUnitCaps), scratch_ / "daemon.out", scratch_ / "daemon.err");
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
  nlohmann::json Runs() {
    TimedRun r = Ctl("root", {"list", "--socket", socket(), "--json"});
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j.value("runs", nlohmann::json::array()) : nlohmann::json::array();
  }
  nlohmann::json Run(const std::string& name) {
    for (const nlohmann::json& r : Runs())
      if (r.value("name", "") == name) return r;
    return nullptr;
  }
  void WaitFor(const std::string& name, const std::function<bool(const nlohmann::json&)>& done, const std::string& what) {
    auto t0 = SteadyClock::now();
    for (nlohmann::json r = Run(name); !(r.is_object() && done(r)); r = Run(name)) {
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

// The "<key>:" line of /proc/<pid>/status, without the key.
inline std::string ProcStatus(pid_t pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

inline std::string StatusUid(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Uid:", 0) == 0) return line.substr(4);
  return "";
}

inline struct stat StatOf(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st;
}

}  // namespace ens::testing
