// The service under a real systemd (systemd 252, Debian 12, booted with systemd-nspawn): the
// Debian package scripts/package builds, installed with apt as README says, the worker's libtorch
// from the venv bound read-only at /opt/ensembled/venv (where ensembled-setup-torch puts it),
// then from inside the machine: READY (active), STATUS=, the watchdog pinged, a real user of the
// ensembled group submitting under run_as "submitter" with the unit's capabilities and sandbox,
// `systemctl reload`, `systemctl stop` mid-run and start (the run resumes, its bits those of the
// same config run alone), a SIGKILL of the daemon (systemd restarts it, the run resumes, the same
// bits), `journalctl -u ensembled`, `systemctl status`, and validate-config = submit.
//
// Needs root, systemd-nspawn, debootstrap and dpkg-deb: skipped otherwise (exit 77). The Debian
// root is made once (debootstrap, about a minute) and cached outside the clone in
// /var/cache/ensembled/systemd-bookworm (ENSEMBLED_SYSTEMD_ROOT); each run boots a copy.
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "common/state/journal.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"
#include "support/serve_harness.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using namespace ens::testing;
namespace fs = std::filesystem;

// What debootstrap puts in the root besides minbase: systemd as PID 1, and the runtime
// libraries the package depends on (the machine has no package lists to fetch them from).
constexpr char kRootPackages[] = "systemd,systemd-sysv,dbus,libcpp-httplib0.11";
constexpr char kSocket[] = "/run/ensembled/ensembled-serve.sock";

std::string OnPath(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

void SkipUnlessPossible() {
  std::string why;
  if (::geteuid() != 0) why = "not root";
  for (const char* tool : {"systemd-nspawn", "debootstrap", "dpkg-deb", "nsenter"})
    if (why.empty() && OnPath(tool).empty()) why = std::string(tool) + " is not installed (scripts/setup)";
  if (why.empty()) return;
  std::fprintf(stderr, "SKIPPED: the real-systemd test: %s\n", why.c_str());
  std::_Exit(77);
}

// The cached root, made when missing or made with other packages.
std::string CachedRoot(const std::string& scratch) {
  const char* env = std::getenv("ENSEMBLED_SYSTEMD_ROOT");
  const std::string dir = env && *env ? env : "/var/cache/ensembled/systemd-bookworm";
  const std::string stamp = dir + "/.ensembled-root";
  fs::create_directories(fs::path(dir).parent_path());
  int lock = ::open((dir + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  ::flock(lock, LOCK_EX);
  if (!fs::exists(stamp) || ReadText(stamp) != kRootPackages) {
    std::error_code ec;
    fs::remove_all(dir + ".tmp", ec);
    auto r = RunWithEnv({OnPath("debootstrap"), "--variant=minbase", std::string("--include=") + kRootPackages,
                         "bookworm", dir + ".tmp", "http://deb.debian.org/debian"},
                        scratch, {}, 900);
    INFO("debootstrap:\n" << r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0) << r.err);
    REQUIRE(r.code == 0);
    WriteText(dir + ".tmp/.ensembled-root", kRootPackages);
    fs::remove_all(dir, ec);
    fs::rename(dir + ".tmp", dir);
  }
  ::close(lock);
  return dir;
}

// A copy of the cached root, booted; commands run inside through nsenter.
class Machine {
 public:
  Machine(const std::string& cached, const TempDir& tmp, const std::string& venv) : tmp_(tmp) {
    root_ = tmp / "root";
    auto cp = Run({"/bin/cp", "-a", "--reflink=auto", cached, root_}, tmp.path());
    REQUIRE(cp.code == 0);
    EnvChanges env;
    // On a host with cgroups v1 only, the machine boots on v1. Where v1 comes with a cgroup2
    // hierarchy beside it (/sys/fs/cgroup/unified, as here), nspawn's default, the hybrid
    // layout, is kept: on v1 alone systemd never learns that a SIGKILLed service's cgroup is
    // empty (no release agent in a container) and waits out TimeoutStopSec before restarting it.
    if (!fs::exists("/sys/fs/cgroup/cgroup.controllers") && !fs::exists("/sys/fs/cgroup/unified/cgroup.procs"))
      env.set["SYSTEMD_NSPAWN_UNIFIED_HIERARCHY"] = "0";
    nspawn_ = SpawnEnv({OnPath("systemd-nspawn"), "--boot", "--keep-unit", "--register=no", "--console=read-only",
                        "-D", root_, "-M", "ens-test-" + std::to_string(::getpid()),
                        "--bind-ro=" + venv + ":/opt/ensembled/venv"},
                       tmp / "console.log", tmp / "console.err", env);
    REQUIRE(nspawn_ > 0);
    auto t0 = SteadyClock::now();
    while ((leader_ = Leader()) <= 0 && SecondsSince(t0) < 60 && IsLive(nspawn_))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    INFO("console:\n" << ReadText(tmp / "console.log") << ReadText(tmp / "console.err"));
    REQUIRE(leader_ > 0);
    // Until its manager answers on the bus (--wait alone fails before the bus is there).
    TimedRun up;
    t0 = SteadyClock::now();
    do {
      up = Exec("systemctl is-system-running --wait", 60);
      if (up.out.rfind("running", 0) == 0 || up.out.rfind("degraded", 0) == 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    } while (SecondsSince(t0) < 120);
    INFO("is-system-running: " << up.out << up.err);
    REQUIRE((up.out.rfind("running", 0) == 0 || up.out.rfind("degraded", 0) == 0));
  }
  ~Machine() {
    if (leader_ > 0) Exec("systemctl poweroff", 20);
    if (nspawn_ > 0 && WaitAtMost(nspawn_, 60) < 0 && leader_ > 0) ::kill(leader_, SIGKILL);
  }
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;

  // `sh -c cmd` inside, as root, with a plain environment.
  TimedRun Exec(const std::string& cmd, double timeout_s = 120) {
    return RunWithEnv({OnPath("nsenter"), "-t", std::to_string(leader_), "-a", "--", "/usr/bin/env", "-i",
                       "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "/bin/sh", "-c", cmd},
                      tmp_.path(), {}, timeout_s);
  }
  std::string Out(const std::string& cmd) {
    auto r = Exec(cmd);
    std::string s = r.out;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  std::string Path(const std::string& inside) const { return root_ + inside; }
  std::string State(const std::string& run) {
    auto r = Exec(std::string("ensemblectl list --socket ") + kSocket + " --json", 30);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j.contains("runs")) return "";
    for (const auto& x : j["runs"])
      if (x.value("name", "") == run) return x.value("state", "");
    return "";
  }
  void WaitUntil(const std::function<bool()>& done, double timeout_s, const std::string& what) {
    auto t0 = SteadyClock::now();
    while (!done()) {
      if (SecondsSince(t0) > timeout_s) {
        INFO("journalctl -u ensembled:\n" << Exec("journalctl -u ensembled --no-pager | tail -n 60").out);
        INFO("systemctl status ensembled:\n" << Exec("systemctl status ensembled --no-pager -l").out);
        INFO("systemctl show ensembled:\n"
             << Exec("systemctl show ensembled -p ActiveState -p SubState -p Result -p NRestarts -p ExecMainStatus").out);
        FAIL("timed out after " << timeout_s << " s waiting for " << what);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }

 private:
  // The machine's PID 1: a descendant of nspawn whose pid in its own namespace is 1.
  pid_t Leader() const {
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string name = e.path().filename();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::string status = ReadText(e.path().string() + "/status");
      std::smatch m;
      if (!std::regex_search(status, m, std::regex(R"(\nNSpid:\t\d+\t1\n)"))) continue;
      for (pid_t p = std::stoi(name); p > 1;) {
        std::smatch pp;
        std::string st = ReadText("/proc/" + std::to_string(p) + "/status");
        if (!std::regex_search(st, pp, std::regex(R"(\nPPid:\t(\d+)\n)"))) break;
        p = std::stoi(pp[1]);
        if (p == nspawn_) return std::stoi(name);
      }
    }
    return -1;
  }

  const TempDir& tmp_;
  std::string root_;
  pid_t nspawn_ = -1, leader_ = -1;
};

uid_t OwnerOf(const std::string& path) {
  struct stat st{};
  return ::lstat(path.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

TEST_CASE("under a real systemd: the package installs, the unit runs a submitter's runs, reload, stop, SIGKILL",
          "[service][systemd][install]") {
  SkipUnlessPossible();
  const auto t_start = SteadyClock::now();
  TempDir tmp;
  const std::string venv = fs::path(ENS_PYTHON).parent_path().parent_path();

  // The reference bits, run alone on this host meanwhile: the same configs with a state_dir.
  constexpr int kRounds = 2, kMembers = 8, kEpochs = 15000;
  std::vector<pid_t> alone;
  for (const char* name : {"stopped", "killed"}) {
    WriteText(tmp / (std::string(name) + "-alone.json"),
              TinyRunConfig(name, 1, kRounds, "\"state_dir\": \"" + tmp / (std::string(name) + "-alone") + "\",",
                            kMembers, kEpochs));
    alone.push_back(SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / (std::string(name) + "-alone.json")},
                             tmp / (std::string(name) + "-alone.out"), tmp / (std::string(name) + "-alone.err")));
  }

  auto pkg = RunWithEnv({std::string(ENS_SOURCE_DIR) + "/scripts/package"}, tmp.path(),
                        {{{"ENSEMBLED_BUILD_DIR", ENS_BINARY_DIR}}, {}}, 300);
  INFO("scripts/package:\n" << pkg.out << pkg.err);
  REQUIRE(pkg.code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(pkg.out, m, std::regex(R"((\S+/ensembled_[^/\s]+\.deb))")));
  const std::string deb = m[1];

  Machine vm(CachedRoot(tmp.path()), tmp, venv);
  fs::create_directories(vm.Path("/srv/pkg"));
  fs::copy_file(deb, vm.Path("/srv/pkg/") + fs::path(deb).filename().string());

  // README's install: apt installs the package; its postinst makes the user and runs.d, links the
  // venv's torch (ensembled-setup-torch), enables and starts the unit.
  auto install = vm.Exec("DEBIAN_FRONTEND=noninteractive apt-get install -y /srv/pkg/" +
                             fs::path(deb).filename().string() + " 2>&1",
                         300);
  INFO("apt-get install:\n" << install.out << install.err);
  REQUIRE(install.code == 0);
  CHECK_THAT(install.out, Catch::Contains("/opt/ensembled/torch -> /opt/ensembled/venv/lib/"));
  CHECK(vm.Out("systemctl is-enabled ensembled") == "enabled");
  // Type=notify: active means READY=1 came.
  CHECK(vm.Out("systemctl is-active ensembled") == "active");
  CHECK(vm.Out("ensembled-setup-torch --check; echo rc=$?").find("rc=0") != std::string::npos);

  // The test's settings: run_as "submitter" in the serve config; a 6 s watchdog (120 s in the unit)
  // to see pings within seconds.
  REQUIRE(vm.Exec("sed -i 's/\"run_as\": \"daemon\"/\"run_as\": \"submitter\"/' /etc/ensembled/serve.json && "
                  "grep -q '\"run_as\": \"submitter\"' /etc/ensembled/serve.json && "
                  "mkdir -p /etc/systemd/system/ensembled.service.d && "
                  "printf '[Service]\\nWatchdogSec=6\\n' > /etc/systemd/system/ensembled.service.d/test.conf && "
                  "systemctl daemon-reload && systemctl restart ensembled")
              .code == 0);
  REQUIRE(vm.Out("systemctl is-active ensembled") == "active");
  const std::string status_text = vm.Out("systemctl show ensembled -p StatusText --value");
  CHECK_FALSE(status_text.empty());
  CHECK_THAT(vm.Exec("systemctl status ensembled --no-pager").out, Catch::Contains("Status: \"" + status_text));

  {  // the watchdog: WatchdogSec=6, pinged every 3 s
    const std::string w1 = vm.Out("systemctl show ensembled -p WatchdogTimestampMonotonic --value");
    std::this_thread::sleep_for(std::chrono::seconds(5));
    const std::string w2 = vm.Out("systemctl show ensembled -p WatchdogTimestampMonotonic --value");
    INFO("watchdog timestamps " << w1 << " then " << w2);
    REQUIRE_FALSE(w1.empty());
    CHECK(std::stoull(w2) > std::stoull(w1));
    CHECK(vm.Out("systemctl show ensembled -p NRestarts --value") == "0");
  }

  // A real user of the submitters' group, her configs outside /home (ProtectHome=yes).
  REQUIRE(vm.Exec("useradd --create-home --groups ensembled alice && install -d -o alice -m 0755 /srv/alice").code == 0);
  const uid_t alice = static_cast<uid_t>(std::stoul(vm.Out("id -u alice")));
  WriteText(vm.Path("/srv/alice/quick.json"), TinyRunConfig("quick", 1, 1, "", 2, 2));
  for (const char* name : {"stopped", "killed"})
    WriteText(vm.Path("/srv/alice/") + name + ".json", TinyRunConfig(name, 1, kRounds, "", kMembers, kEpochs));
  REQUIRE(vm.Exec("chown alice: /srv/alice/*.json").code == 0);
  auto as_alice = [&](const std::string& args) { return vm.Exec("runuser -u alice -- ensemblectl " + args, 60); };

  auto valid = as_alice("validate-config /srv/alice/quick.json");
  INFO("validate-config: " << valid.out << valid.err);
  CHECK(valid.code == 0);
  auto sub = as_alice(std::string("submit --socket ") + kSocket + " /srv/alice/quick.json");
  INFO("submit: " << sub.out << sub.err);
  REQUIRE(sub.code == 0);
  vm.WaitUntil([&] { return vm.State("quick") == "finished"; }, 120, "quick finished");
  const std::string quick = vm.Path("/var/lib/ensembled/runs/quick");
  CHECK(OwnerOf(quick) == alice);
  CHECK(OwnerOf(quick + "/journal.jsonl") == alice);
  CHECK_THAT(vm.Exec("journalctl -u ensembled --no-pager").out, Catch::Contains("[run quick]"));

  // reload: the same daemon reads runs.d again.
  const std::string pid_before = vm.Out("systemctl show ensembled -p MainPID --value");
  auto reload = vm.Exec("systemctl reload ensembled");
  INFO("reload: " << reload.out << reload.err);
  CHECK(reload.code == 0);
  vm.WaitUntil([&] { return vm.Exec("journalctl -u ensembled --no-pager").out.find("SIGHUP: reading") != std::string::npos; },
               20, "the daemon's SIGHUP line");
  CHECK(vm.Out("systemctl show ensembled -p MainPID --value") == pid_before);

  auto mid_round = [&](const std::string& run) {
    return CountEvents(JournalOf(vm.Path("/var/lib/ensembled/runs/" + run)), "member_done") >= 2;
  };
  auto same_as_alone = [&](const std::string& run) {
    const std::string served = vm.Path("/var/lib/ensembled/runs/" + run);
    for (const auto& [key, n] : DoneCounts(JournalOf(served))) {
      INFO(run << " round " << key.first << " member " << key.second);
      CHECK(n == 1);
    }
    auto diffs = CompareRuns(tmp / (run + "-alone"), served, kRounds, kMembers, tmp.path(), CompareMode::kBytes);
    INFO(run << ": " << Joined(diffs));
    CHECK(diffs.empty());
    CHECK(OwnerOf(served) == alice);
  };
  for (pid_t p : alone) REQUIRE(WaitAtMost(p, 300) == 0);

  // systemctl stop with a run in flight; it resumes after systemctl start.
  REQUIRE(as_alice(std::string("submit --socket ") + kSocket + " /srv/alice/stopped.json").code == 0);
  vm.WaitUntil([&] { return mid_round("stopped"); }, 120, "stopped mid-round");
  auto stop = vm.Exec("systemctl stop ensembled", 400);
  CHECK(stop.code == 0);
  CHECK(vm.Out("systemctl is-active ensembled") == "inactive");
  CHECK(vm.Out("systemctl show ensembled -p Result --value") == "success");
  CHECK_FALSE(ReplayJournal(JournalOf(vm.Path("/var/lib/ensembled/runs/stopped"))).finished);
  REQUIRE(vm.Exec("systemctl start ensembled").code == 0);
  vm.WaitUntil([&] { return vm.State("stopped") == "finished"; }, 240, "stopped finished after the start");
  same_as_alone("stopped");

  // A SIGKILL of the daemon: Restart=on-failure brings it back (RestartSec=10), the run resumes.
  REQUIRE(as_alice(std::string("submit --socket ") + kSocket + " /srv/alice/killed.json").code == 0);
  vm.WaitUntil([&] { return mid_round("killed"); }, 120, "killed mid-round");
  // As a crash would: the signal from outside systemd (a `systemctl kill` is a client's request,
  // which systemd does not restart after).
  REQUIRE(vm.Exec("kill -KILL \"$(systemctl show ensembled -p MainPID --value)\"").code == 0);
  vm.WaitUntil([&] { return vm.Out("systemctl show ensembled -p NRestarts --value") == "1" &&
                            vm.Out("systemctl is-active ensembled") == "active"; },
               90, "systemd restarting the daemon");
  vm.WaitUntil([&] { return vm.State("killed") == "finished"; }, 240, "killed finished after the restart");
  same_as_alone("killed");
  CHECK_THAT(vm.Exec("journalctl -u ensembled --no-pager").out, Catch::Contains("[run killed]"));

  std::printf("real systemd test: %.0f s (boot, install, 3 runs, reload, stop/start, SIGKILL/restart)\n",
              SecondsSince(t_start));
}

}  // namespace
}  // namespace ens
