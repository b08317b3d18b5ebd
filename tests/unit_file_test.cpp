// The systemd packaging: the configured unit (build/packaging/ensembled.service, running
// `ensembled serve`) passes `systemd-analyze verify`, the sysusers.d snippet parses, the serve
// config it reads (build/packaging/serve.json, from configs/serve.json) and the tmpfiles.d
// snippet fit it, the example run config (packaging/ensembled.json) is valid, and
// `cmake --install` puts it all in place without overwriting an edited config.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>

#include "common/config/config.h"
#include "common/base/exit_codes.h"
#include "common/ipc/control_client.h"
#include "orchestrator/serve/serve_config.h"
#include "support/env_spawn.h"

namespace ens {
namespace {

using namespace ens::testing;

std::string ConfiguredUnit() { return std::string(ENS_BINARY_DIR) + "/packaging/ensembled.service"; }

// The first program named `name` on PATH (or a usual sbin place), or "".
std::string FindProgram(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/sbin:/usr/bin:/bin";
  std::stringstream dirs(path);
  std::string d;
  while (std::getline(dirs, d, ':'))
    if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
  return "";
}

// Value of the last `key=` line of the [Service] (or any) section; "" when absent.
std::string UnitValue(const std::string& unit, const std::string& key) {
  std::istringstream in(unit);
  std::string line, value;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) value = line.substr(key.size() + 1);
  return value;
}

std::vector<std::string> UnitValues(const std::string& unit, const std::string& key) {
  std::istringstream in(unit);
  std::string line;
  std::vector<std::string> out;
  while (std::getline(in, line))
    if (line.rfind(key + "=", 0) == 0) out.push_back(line.substr(key.size() + 1));
  return out;
}

// Lines of `text` that look like a systemd complaint.
std::vector<std::string> Complaints(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  static const std::regex bad(R"(Unknown|Failed|[Ii]nvalid|not executable|[Ii]gnoring|[Mm]issing|[Ee]rror)");
  while (std::getline(in, line))
    if (std::regex_search(line, bad)) out.push_back(line);
  return out;
}

TEST_CASE("the configured unit file says what the daemon needs", "[service][unit]") {
  std::string unit = ReadText(ConfiguredUnit());
  REQUIRE_FALSE(unit.empty());
  INFO(unit);
  CHECK(unit.find('@') == std::string::npos);  // every @VAR@ was configured
  CHECK(UnitValue(unit, "Type") == "notify");
  CHECK(UnitValue(unit, "NotifyAccess") == "main");
  CHECK(UnitValue(unit, "KillMode") == "mixed");
  CHECK(UnitValue(unit, "Restart") == "on-failure");
  CHECK(UnitValue(unit, "RestartPreventExitStatus") == std::to_string(exit_code::kPermanentFailure));
  CHECK(UnitValue(unit, "User") == "ensembled");
  CHECK(UnitValue(unit, "Group") == "ensembled");
  CHECK(UnitValue(unit, "RuntimeDirectory") == "ensembled");
  CHECK(UnitValue(unit, "StateDirectory") == "ensembled");
  CHECK(UnitValue(unit, "NoNewPrivileges") == "yes");
  CHECK(UnitValue(unit, "ProtectSystem") == "strict");
  CHECK(UnitValue(unit, "ProtectHome") == "yes");
  CHECK(UnitValue(unit, "PrivateTmp") == "yes");
  CHECK(UnitValue(unit, "DevicePolicy") == "closed");
  CHECK(UnitValue(unit, "PrivateDevices").empty());  // it would hide /dev/nvidia*
  auto devices = UnitValues(unit, "DeviceAllow");
  for (const char* d : {"/dev/nvidiactl rw", "/dev/nvidia-uvm rw", "/dev/nvidia-uvm-tools rw", "/dev/nvidia-modeset rw",
                        "/dev/nvidia0 rw"})
    CHECK(std::find(devices.begin(), devices.end(), d) != devices.end());
  // The stop timeout must outlast the daemon's own graceful stop (stop_timeout_s, 300 s default).
  CHECK(std::stoi(UnitValue(unit, "TimeoutStopSec")) > static_cast<int>(Config{}.stop_timeout_s));
  CHECK(std::stoi(UnitValue(unit, "WatchdogSec")) >= 10);
  std::smatch m;
  std::string exec = UnitValue(unit, "ExecStart");
  REQUIRE(std::regex_match(exec, m, std::regex(R"((/\S+)/ensembled serve --config (/\S+)/ensembled/serve\.json)")));
  // `systemctl reload`: SIGHUP, which the daemon takes as "read runs_dir again".
  CHECK(UnitValue(unit, "ExecReload") == "/bin/sh -c 'kill -HUP \"$$1\"' ensembled-reload $MAINPID");
  // The daemon writes submitted configs into runs_dir and removes cancelled ones.
  CHECK(UnitValue(unit, "ReadWritePaths") == m[2].str() + "/ensembled/runs.d");
}

TEST_CASE("the unit grants the daemon only the capabilities run_as submitter needs, never DAC_OVERRIDE", "[service][unit]") {
  std::string unit = ReadText(ConfiguredUnit());
  REQUIRE_FALSE(unit.empty());
  // orchestrator/serve/run_as.h's five, and CAP_SETPCAP for the bounding set of a run's child
  // (common/base/capabilities.h HardenChildRaw).
  const std::string caps = "CAP_SETUID CAP_SETGID CAP_CHOWN CAP_DAC_READ_SEARCH CAP_KILL CAP_SETPCAP";
  CHECK(UnitValue(unit, "CapabilityBoundingSet") == caps);
  CHECK(UnitValue(unit, "AmbientCapabilities") == caps);
  CHECK(UnitValue(unit, "User") == "ensembled");  // not root: the capabilities are all it has
  CHECK(unit.find("CAP_DAC_OVERRIDE ") == std::string::npos);
  CHECK(UnitValue(unit, "NoNewPrivileges") == "yes");
}

// (bindir, sysconfdir) as the configured unit names them.
std::pair<std::string, std::string> UnitDirs() {
  std::string exec = UnitValue(ReadText(ConfiguredUnit()), "ExecStart");
  std::smatch m;
  if (!std::regex_match(exec, m, std::regex(R"((/\S+)/ensembled serve --config (/\S+)/ensembled/serve\.json)"))) return {};
  return {m[1], m[2]};
}

// `cmake --install` of this build into `root` (DESTDIR), with `extra` arguments.
TimedRun InstallInto(const std::string& root, const std::string& scratch, std::vector<std::string> extra = {}) {
  const std::string cmake = FindProgram("cmake");
  REQUIRE_FALSE(cmake.empty());  // it configured this build
  std::vector<std::string> argv = {cmake, "--install", ENS_BINARY_DIR};
  argv.insert(argv.end(), extra.begin(), extra.end());
  EnvChanges env;
  env.set = {{"DESTDIR", root}};
  return RunWithEnv(argv, scratch, env, 300);
}

TEST_CASE("the installed serve config and the tmpfiles.d snippet fit the unit", "[service][unit]") {
  auto [bindir, sysconf] = UnitDirs();
  REQUIRE_FALSE(sysconf.empty());
  const std::string runs_dir = sysconf + "/ensembled/runs.d";
  const std::string path = std::string(ENS_BINARY_DIR) + "/packaging/serve.json";
  auto cfg = LoadServeConfigFile(path);
  INFO(path << ": " << (cfg.ok() ? "ok" : cfg.status().message()));
  REQUIRE(cfg.ok());
  CHECK(cfg->runs_dir == runs_dir);
  CHECK(cfg->state_root == "/var/lib/ensembled/runs");  // inside StateDirectory=ensembled
  CHECK(cfg->service.http_port == 0);
  CHECK(cfg->service.log_file.empty());  // the journal has it all
  // Under the unit the socket lands in RuntimeDirectory=ensembled.
  ::setenv("RUNTIME_DIRECTORY", "/run/ensembled", 1);
  CHECK(ServeControlSocket(*cfg) == "/run/ensembled/ensembled-serve.sock");
  ::unsetenv("RUNTIME_DIRECTORY");
  // It is configs/serve.json (every key documented there) but for runs_dir.
  std::string source = ReadText(std::string(ENS_SOURCE_DIR) + "/configs/serve.json");
  std::string installed = ReadText(path);
  const std::string from = R"("runs_dir": "/etc/ensembled/runs.d")";
  REQUIRE(source.find(from) != std::string::npos);
  CHECK(installed == source.replace(source.find(from), from.size(), "\"runs_dir\": \"" + runs_dir + "\""));
  // runs.d: the daemon's user owns it, the group (who may submit) may drop files in.
  std::string tmpfiles = ReadText(std::string(ENS_BINARY_DIR) + "/packaging/ensembled.tmpfiles.conf");
  CHECK_THAT(tmpfiles, Catch::Contains("\nd " + runs_dir + " 3775 ensembled ensembled -\n"));
  CHECK(tmpfiles.find('@') == std::string::npos);
}

TEST_CASE("cmake --install puts the unit, the serve config and runs.d in place and keeps an edited serve.json",
          "[service][unit][install]") {
  auto [bindir, sysconf] = UnitDirs();
  REQUIRE_FALSE(bindir.empty());
  const std::string prefix = std::filesystem::path(bindir).parent_path().string();
  TempDir tmp;
  const std::string root = tmp / "root";
  auto first = InstallInto(root, tmp.path());
  INFO("cmake --install:\n" << first.out << first.err);
  REQUIRE(first.code == 0);
  const std::string etc = root + sysconf + "/ensembled";
  CHECK(std::filesystem::is_directory(etc + "/runs.d"));
  CHECK(ReadText(etc + "/serve.json") == ReadText(std::string(ENS_BINARY_DIR) + "/packaging/serve.json"));
  CHECK(std::filesystem::exists(etc + "/ensembled.json"));
  CHECK(ReadText(root + prefix + "/lib/systemd/system/ensembled.service") == ReadText(ConfiguredUnit()));
  const std::string sysusers_conf = root + prefix + "/lib/sysusers.d/ensembled.conf";
  const std::string tmpfiles_conf = root + prefix + "/lib/tmpfiles.d/ensembled.conf";
  CHECK(std::filesystem::exists(sysusers_conf));
  CHECK(std::filesystem::exists(tmpfiles_conf));
  CHECK(std::filesystem::exists(root + prefix + "/share/ensembled/serve.json"));

  // An operator's edit survives a reinstall.
  WriteText(etc + "/serve.json", "// edited\n" + ReadText(etc + "/serve.json"));
  auto second = InstallInto(root, tmp.path());
  INFO("again:\n" << second.out << second.err);
  REQUIRE(second.code == 0);
  CHECK_THAT(second.out, Catch::Contains("Keeping existing: " + etc + "/serve.json"));
  CHECK_THAT(ReadText(etc + "/serve.json"), Catch::StartsWith("// edited\n"));

  // systemd-sysusers and systemd-tmpfiles, as the README's steps run them, on that root.
  std::string sysusers = FindProgram("systemd-sysusers"), tmpfiles = FindProgram("systemd-tmpfiles");
  if (sysusers.empty() || tmpfiles.empty() || ::geteuid() != 0) {
    WARN("systemd-sysusers/systemd-tmpfiles missing, or not root: runs.d's owner and mode not checked");
    return;
  }
  std::filesystem::create_directories(root + "/etc");  // where sysusers writes passwd and group
  auto u = Run({sysusers, "--root=" + root, sysusers_conf}, tmp.path());
  INFO(u.out << u.err);
  REQUIRE(u.code == 0);
  auto t = Run({tmpfiles, "--root=" + root, "--create", tmpfiles_conf}, tmp.path());
  INFO(t.out << t.err);
  CHECK(t.code == 0);
  struct stat st;
  REQUIRE(::stat((etc + "/runs.d").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 03775);  // setgid and sticky: a drop directory
  std::smatch m;
  const std::string passwd = "\n" + ReadText(root + "/etc/passwd");
  REQUIRE(std::regex_search(passwd, m, std::regex(R"(\nensembled:[^:]*:(\d+):(\d+):)")));
  CHECK(st.st_uid == static_cast<uid_t>(std::stoul(m[1])));
  CHECK(st.st_gid == static_cast<gid_t>(std::stoul(m[2])));
}

TEST_CASE("cmake --install --prefix /usr on a build configured for another prefix: the unit names where the files went",
          "[service][unit][install]") {
  auto [bindir, sysconf] = UnitDirs();
  REQUIRE_FALSE(bindir.empty());
  TempDir tmp;
  const std::string root = tmp / "root";
  auto r = InstallInto(root, tmp.path(), {"--prefix", "/usr"});
  INFO("cmake --install --prefix /usr:\n" << r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(std::filesystem::exists(root + "/usr/bin/ensembled"));
  CHECK(std::filesystem::exists(root + "/usr/sbin/ensembled-setup-torch"));
  const std::string unit = ReadText(root + "/usr/lib/systemd/system/ensembled.service");
  CHECK(UnitValue(unit, "ExecStart") == "/usr/bin/ensembled serve --config /etc/ensembled/serve.json");
  CHECK(UnitValue(unit, "ReadWritePaths") == "/etc/ensembled/runs.d");
  CHECK_THAT(ReadText(root + "/usr/lib/tmpfiles.d/ensembled.conf"), Catch::Contains("d /etc/ensembled/runs.d 3775"));
  auto cfg = LoadServeConfigFile(root + "/etc/ensembled/serve.json");
  REQUIRE(cfg.ok());
  CHECK(cfg->runs_dir == "/etc/ensembled/runs.d");
  CHECK(std::filesystem::is_directory(root + "/etc/ensembled/runs.d"));
  CHECK(std::filesystem::exists(root + "/usr/share/ensembled/serve.json"));
  // Nothing under the configured prefix when it is another one.
  if (std::filesystem::path(bindir).parent_path() != "/usr")
    CHECK_FALSE(std::filesystem::exists(root + std::filesystem::path(bindir).parent_path().string()));
}

TEST_CASE("systemd-analyze verify accepts the configured unit", "[service][unit]") {
  std::string analyze = FindProgram("systemd-analyze");
  if (analyze.empty()) {
    WARN("systemd-analyze is not installed: skipping the unit verification");
    return;
  }
  std::string unit = ReadText(ConfiguredUnit());
  REQUIRE_FALSE(unit.empty());
  TempDir tmp;
  // The installed binary does not exist here: point ExecStart at the built one.
  std::string exec = UnitValue(unit, "ExecStart");
  std::string bin = exec.substr(0, exec.find(' '));
  REQUIRE(bin.size() > std::string("/ensembled").size());
  unit.replace(unit.find("ExecStart=" + bin), std::string("ExecStart=" + bin).size(),
               "ExecStart=" + BinaryPath("ensembled"));
  WriteText(tmp / "ensembled.service", unit);
  auto r = Run({analyze, "verify", tmp / "ensembled.service"}, tmp.path());
  INFO("systemd-analyze verify:\nstdout:\n" << r.out << "\nstderr:\n" << r.err);
  CHECK(r.code == 0);
  CHECK(Complaints(r.out + r.err).empty());

  SECTION("and catches a broken one (the check can fail)") {
    WriteText(tmp / "broken.service", unit + "\n[Service]\nTipe=notify\n");
    auto b = Run({analyze, "verify", tmp / "broken.service"}, tmp.path());
    CHECK_FALSE(Complaints(b.out + b.err).empty());
  }
}

TEST_CASE("systemd-sysusers accepts the sysusers.d snippet", "[service][unit]") {
  std::string sysusers = FindProgram("systemd-sysusers");
  if (sysusers.empty()) {
    WARN("systemd-sysusers is not installed: skipping");
    return;
  }
  TempDir tmp;
  std::filesystem::create_directories(tmp / "root/etc");
  auto r = Run({sysusers, "--root=" + tmp / "root", "--dry-run", std::string(ENS_SOURCE_DIR) + "/packaging/ensembled.sysusers.conf"},
               tmp.path());
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK((r.out + r.err).find("Creating user 'ensembled'") != std::string::npos);
  CHECK(Complaints(r.out + r.err).empty());
}

TEST_CASE("the packaged default config is valid and fits the unit", "[service][unit]") {
  std::string path = std::string(ENS_SOURCE_DIR) + "/packaging/ensembled.json";
  TempDir tmp;
  auto r = Run({BinaryPath("ensemblectl"), "validate-config", path}, tmp.path());
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(": ok (") != std::string::npos);

  auto cfg = LoadConfigFile(path);
  REQUIRE(cfg.ok());
  CHECK(cfg->state_dir == "/var/lib/ensembled/default");
  CHECK(cfg->service.http_port == 0);
  CHECK(cfg->service.http_bind == "127.0.0.1");
  CHECK(cfg->service.control_socket.empty());
  CHECK(cfg->service.log_file.empty());
  // Under the unit the socket lands in RuntimeDirectory=ensembled.
  ::setenv("RUNTIME_DIRECTORY", "/run/ensembled", 1);
  CHECK(ControlSocketPath(cfg->service.control_socket, cfg->run_name, cfg->state_dir) ==
        "/run/ensembled/" + cfg->run_name + ".sock");
  ::unsetenv("RUNTIME_DIRECTORY");
  std::string unit = ReadText(ConfiguredUnit());
  if (!unit.empty()) CHECK(cfg->stop_timeout_s < std::stoi(UnitValue(unit, "TimeoutStopSec")));
  // Every key is commented (a line comment above or beside every "key": line).
  std::istringstream in(ReadText(path));
  std::string line, prev;
  std::vector<std::string> uncommented;
  while (std::getline(in, line)) {
    bool key = std::regex_search(line, std::regex(R"(^\s*"[a-z_]+":)"));
    bool commented = line.find("//") != std::string::npos || prev.find("//") != std::string::npos;
    bool opens = line.find('{') != std::string::npos;  // a section: its keys carry the comments
    if (key && !commented && !opens) uncommented.push_back(line);
    prev = line;
  }
  INFO("keys without a comment:\n" << Joined(uncommented));
  CHECK(uncommented.empty());

  // Where the built worker finds libtorch: the service runs with ProtectHome=yes as user
  // ensembled, so a libtorch under a home directory cannot be loaded by the installed unit.
  std::string cache = ReadText(std::string(ENS_BINARY_DIR) + "/CMakeCache.txt");
  std::smatch m;
  if (std::regex_search(cache, m, std::regex(R"(Torch_DIR:PATH=(\S+))"))) {
    std::string torch = m[1];
    if (torch.rfind("/root/", 0) == 0 || torch.rfind("/home/", 0) == 0)
      WARN("ensemble-worker's libtorch is under a home directory (" << torch
           << "): an installed ensembled.service (User=ensembled, ProtectHome=yes) cannot load it; "
              "build with ENSEMBLED_VENV outside /root and /home (e.g. /opt/ensembled/venv) for a service install");
  }
}

// The ServiceSpec comment and configs document "" as the default of control_socket (and
// log_file), but the validator rejects an explicit "": a config that spells out the default
// fails with "must be a non-empty string" (common/config/config.cpp ReadService, v.Path).
TEST_CASE("an explicit \"\" for service.control_socket and service.log_file (their defaults) is accepted",
          "[service][unit]") {
  Config cfg;
  auto errors = ValidateConfigText(R"({"state_dir": "/tmp/x",
      "members": {"defaults": {"layers": [{"units": 4}]}, "count": 1},
      "service": {"control_socket": "", "log_file": ""}})",
                                   "/tmp", &cfg);
  std::string all;
  for (const auto& e : errors) all += e.pointer + ": " + e.message + "\n";
  INFO(all);
  CHECK(errors.empty());
}

}  // namespace
}  // namespace ens
