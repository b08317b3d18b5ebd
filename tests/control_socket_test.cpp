// ControlSocket in-process (silent, slow and oversized clients against its deadline and
// bounds, timed), then the control socket of a running ensembled, driven with the real
// ensemblectl: its mode, the live status, pause/resume at member boundaries, reload (safe
// changes accepted at the next round boundary, unsafe ones refused), stop and resume, and
// hostile clients.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/base/exit_codes.h"
#include "common/ipc/control_client.h"
#include "orchestrator/service/control_socket.h"
#include "support/env_spawn_notify.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kMembers = 6, kWorkers = 2;

// Slow enough members (about 2 s each on one CPU thread) to act while they train.
std::string CtlConfig(const std::string& state_dir, int rounds, uint64_t seed = 17, const std::string& name = "ctl",
                      int epochs = 240, int rows = 2000) {
  return R"({
    // control socket test: 6 members x 240 epochs x 2000 rows on 2 CPU workers, one member
    // per task (pack_size 1), so members run and finish one by one
    "run_name": ")" + name + R"(", "state_dir": ")" + state_dir + R"(", "run_seed": )" + std::to_string(seed) + R"(,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(kWorkers) + R"(, "threads_per_worker": 1},
    "data": {"source": "synthetic",
             "synthetic": {"initial_rows": )" + std::to_string(rows) + R"(, "pool_rows": 400, "holdout_rows": 300}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 32, "layers": [{"units": 32}]},
                "count": )" + std::to_string(kMembers) + R"(},
    "mutation": {"policy": "append_from_pool", "k": 20},
    "rounds": {"count": )" + std::to_string(rounds) + R"(}, "pack_size": 1
  })";
}

pid_t StartDaemon(const TempDir& tmp, const std::string& cfg, const std::string& tag, const EnvChanges& env = {}) {
  return SpawnEnv({BinaryPath("ensembled"), "run", "--config", cfg}, tmp / (tag + ".out"), tmp / (tag + ".err"), env);
}

std::string Logs(const TempDir& tmp, const std::string& tag) {
  return "--- " + tag + " stdout:\n" + ReadText(tmp / (tag + ".out")) + "--- " + tag + " stderr:\n" +
         ReadText(tmp / (tag + ".err"));
}

json Parse(const std::string& s) { return json::parse(s, nullptr, false); }

bool IsRefusal(const std::string& reply) {
  json j = Parse(reply);
  return j.is_object() && j.contains("ok") && j["ok"] == false && j.contains("error") && j["error"].is_string() &&
         !j["error"].get<std::string>().empty();
}

// ---- ControlSocket alone, served from this thread as a daemon's loop does ----------------


json Echo(const json& req) { return {{"ok", true}, {"cmd", req["cmd"]}}; }

// The loop of a daemon: poll the socket's fds (at most NextWakeMs), Serve(), until `done`
// or timeout_s. Returns the longest Serve() call in ms.
double ServeLoop(ControlSocket& sock, const std::function<bool()>& done, double timeout_s = 10) {
  double longest = 0;
  auto t0 = SteadyClock::now();
  while (!done() && SecondsSince(t0) < timeout_s) {
    std::vector<struct pollfd> fds;
    for (int fd : sock.PollFds()) fds.push_back({fd, POLLIN, 0});
    int wake = sock.NextWakeMs();
    ::poll(fds.data(), fds.size(), wake < 0 ? 20 : std::min(wake, 20));
    auto s0 = SteadyClock::now();
    sock.Serve(Echo);
    longest = std::max(longest, SecondsSince(s0) * 1000);
  }
  return longest;
}

TEST_CASE("ControlSocket: ten silent clients delay neither a request nor the loop", "[control][control_socket]") {
  TempDir tmp;
  ControlSocket sock;
  REQUIRE(sock.Listen(tmp / "c.sock").ok());
  std::vector<int> silent;
  for (int i = 0; i < 10; ++i) silent.push_back(ConnectUnix(tmp / "c.sock"));
  for (int fd : silent) REQUIRE(fd >= 0);
  ServeLoop(sock, [&] { return sock.open_connections() == 10; }, 2);
  REQUIRE(sock.open_connections() == 10);

  std::atomic<bool> answered{false};
  double latency_ms = -1;
  StatusOr<json> reply = Status::Timeout("no reply yet");
  std::thread client([&] {
    auto t0 = SteadyClock::now();
    reply = ControlRequest(tmp / "c.sock", {{"cmd", "status"}}, 2000);
    latency_ms = SecondsSince(t0) * 1000;
    answered = true;
  });
  double longest = ServeLoop(sock, [&] { return answered.load(); }, 5);
  client.join();
  INFO("request answered in " << latency_ms << " ms; longest Serve() " << longest << " ms");
  REQUIRE(reply.ok());
  CHECK((*reply)["ok"] == true);
  CHECK((*reply)["cmd"] == "status");
  CHECK(latency_ms < 200);
  CHECK(longest < 50);
  CHECK(sock.open_connections() == 10);  // still waiting for their requests
  for (int fd : silent) ::close(fd);
}

TEST_CASE("ControlSocket: past its bounds (per uid, in all) a connection is refused at once, clearly",
          "[control][control_socket]") {
  TempDir tmp;
  ControlLimits limits;
  SECTION("per uid") { limits.max_per_uid = 3; }
  SECTION("in all") { limits.max_connections = 3; }
  ControlSocket sock(limits);
  REQUIRE(sock.Listen(tmp / "c.sock").ok());
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(ConnectUnix(tmp / "c.sock"));
  ServeLoop(sock, [&] { return sock.open_connections() == 3; }, 2);
  REQUIRE(sock.open_connections() == 3);

  int extra = ConnectUnix(tmp / "c.sock");
  REQUIRE(extra >= 0);
  auto t0 = SteadyClock::now();
  sock.Serve(Echo);
  std::string refusal = ReadToEnd(extra, 1000);  // the reply, then EOF: closed by the daemon
  double ms = SecondsSince(t0) * 1000;
  ::close(extra);
  INFO(refusal << " after " << ms << " ms");
  json j = Parse(refusal);
  REQUIRE(IsRefusal(refusal));
  CHECK(j["error"].get<std::string>().find("too many open control connections") != std::string::npos);
  CHECK(ms < 500);
  CHECK(sock.open_connections() == 3);

  // Once they go, requests are served again.
  for (int fd : held) ::close(fd);
  ServeLoop(sock, [&] { return sock.open_connections() == 0; }, 2);
  std::atomic<bool> answered{false};
  StatusOr<json> reply = Status::Timeout("no reply yet");
  std::thread client([&] {
    reply = ControlRequest(tmp / "c.sock", {{"cmd", "list"}}, 2000);
    answered = true;
  });
  ServeLoop(sock, [&] { return answered.load(); }, 5);
  client.join();
  REQUIRE(reply.ok());
  CHECK((*reply)["ok"] == true);
}

TEST_CASE("ControlSocket: one uid at its bound does not shut out another uid", "[control][control_socket][uid]") {
  if (::geteuid() != 0) {
    std::printf("[control] skipped: connecting as another user needs root (to become nobody)\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  TempDir tmp;
  ControlLimits limits;
  limits.max_per_uid = 3;
  ControlSocket sock(limits);
  REQUIRE(sock.Listen(tmp / "c.sock", 0666).ok());
  ::chmod(tmp.path().c_str(), 0711);  // nobody may reach the socket
  std::vector<int> held;
  for (int i = 0; i < 3; ++i) held.push_back(ConnectUnix(tmp / "c.sock"));
  ServeLoop(sock, [&] { return sock.open_connections() == 3; }, 2);
  REQUIRE(sock.open_connections() == 3);
  // As nobody: one request; exit 0 when it was answered {"ok": true} (no allocation after fork).
  const std::string path = tmp / "c.sock";
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(126);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) ::_exit(125);
    const char req[] = "{\"cmd\": \"status\"}\n";
    if (::send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof(req) - 1)) ::_exit(124);
    char buf[512] = {};
    size_t got = 0;
    for (;;) {
      struct pollfd p {fd, POLLIN, 0};
      if (::poll(&p, 1, 5000) <= 0) ::_exit(123);
      ssize_t n = ::recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::_exit(std::strstr(buf, "\"ok\":true") != nullptr ? 0 : 1);
  }
  REQUIRE(pid > 0);
  int status = -1;
  ServeLoop(sock, [&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, 10);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(sock.open_connections() == 3);  // root's, still open
  for (int fd : held) ::close(fd);
}

TEST_CASE("ControlSocket: a deferred request is answered by Reply() later, and others are served meanwhile",
          "[control][control_socket]") {
  TempDir tmp;
  ControlSocket sock;
  REQUIRE(sock.Listen(tmp / "c.sock").ok());
  uint64_t ticket = 0;
  auto handler = [&](const json& req) -> json {
    if (req["cmd"] == "later") {
      ticket = sock.Defer();
      return {{"ok", false}, {"error", "not sent"}};  // ignored: deferred
    }
    return Echo(req);
  };
  std::atomic<bool> later_done{false}, now_done{false};
  StatusOr<json> later = Status::Timeout("no reply yet"), now = Status::Timeout("no reply yet");
  std::thread a([&] {
    later = ControlRequest(tmp / "c.sock", {{"cmd", "later"}}, 5000);
    later_done = true;
  });
  auto serve_until = [&](const std::function<bool()>& done) {
    auto t0 = SteadyClock::now();
    while (!done() && SecondsSince(t0) < 5) {
      std::vector<struct pollfd> fds;
      for (int fd : sock.PollFds()) fds.push_back({fd, POLLIN, 0});
      ::poll(fds.data(), fds.size(), 20);
      sock.Serve(handler);
    }
  };
  serve_until([&] { return ticket != 0; });
  REQUIRE(ticket != 0);
  std::thread b([&] {
    now = ControlRequest(tmp / "c.sock", {{"cmd", "now"}}, 5000);
    now_done = true;
  });
  serve_until([&] { return now_done.load(); });
  b.join();
  REQUIRE(now.ok());
  CHECK((*now)["cmd"] == "now");
  CHECK_FALSE(later_done);
  sock.Reply(ticket, {{"ok", true}, {"answer", 42}});
  serve_until([&] { return later_done.load(); });
  a.join();
  REQUIRE(later.ok());
  CHECK((*later)["answer"] == 42);
  CHECK(sock.open_connections() == 0);
  sock.Reply(ticket, {{"ok", true}});  // its connection is gone: nothing
}

TEST_CASE("ControlSocket: half a line is dropped at the deadline with an error reply", "[control][control_socket]") {
  TempDir tmp;
  ControlSocket sock;
  REQUIRE(sock.Listen(tmp / "c.sock").ok());
  int fd = ConnectUnix(tmp / "c.sock");
  REQUIRE(fd >= 0);
  const std::string half = "{\"cmd\": \"sta";
  REQUIRE(::send(fd, half.data(), half.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(half.size()));
  auto t0 = SteadyClock::now();
  std::string reply;
  std::atomic<bool> got{false};
  std::thread client([&] {
    reply = ReadToEnd(fd, 5000);
    got = true;
  });
  double longest = ServeLoop(sock, [&] { return got.load(); }, 6);
  client.join();
  double ms = SecondsSince(t0) * 1000;
  ::close(fd);
  INFO(reply << " after " << ms << " ms; longest Serve() " << longest << " ms");
  REQUIRE(IsRefusal(reply));
  CHECK(Parse(reply)["error"].get<std::string>().find("not received in time") != std::string::npos);
  CHECK(ms >= kControlDeadlineMs - 100);
  CHECK(ms < kControlDeadlineMs + 500);
  CHECK(sock.open_connections() == 0);
  CHECK(longest < 50);
}

TEST_CASE("ControlSocket: a line over 1 MiB gets an error reply", "[control][control_socket]") {
  TempDir tmp;
  ControlSocket sock;
  REQUIRE(sock.Listen(tmp / "c.sock").ok());
  int fd = ConnectUnix(tmp / "c.sock");
  REQUIRE(fd >= 0);
  std::string reply;
  std::atomic<bool> got{false};
  std::thread client([&] {
    std::string line = "{\"cmd\": \"" + std::string(kControlMaxLine + 10, 'x') + "\"}\n";
    size_t off = 0;
    while (off < line.size()) {  // until the daemon stops taking it
      ssize_t n = ::send(fd, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    reply = ReadToEnd(fd, 5000);
    got = true;
  });
  ServeLoop(sock, [&] { return got.load(); }, 6);
  client.join();
  ::close(fd);
  INFO(reply.substr(0, 300));
  REQUIRE(IsRefusal(reply));
  CHECK(Parse(reply)["error"].get<std::string>().find("longer than 1048576 bytes") != std::string::npos);
  CHECK(sock.open_connections() == 0);
}

// ---- the daemon -----------------------------------------------------------------------------

TEST_CASE("the control socket is private, shows the live workers, shrugs off garbage, and stop resumes",
          "[service][control]") {
  TempDir tmp;
  std::string state = tmp / "state";
  std::filesystem::create_directories(tmp / "rt");
  WriteText(tmp / "cfg.json", CtlConfig(state, 3));
  // As under systemd: RuntimeDirectory=ensembled sets RUNTIME_DIRECTORY.
  EnvChanges env;
  env.set["RUNTIME_DIRECTORY"] = tmp / "rt";
  Daemon d(StartDaemon(tmp, tmp / "cfg.json", "d1", env));
  pid_t sup = d.pid();
  std::string sock = tmp / "rt/ctl.sock";

  REQUIRE(WaitUntil(60, [&] { return std::filesystem::exists(sock) || d.Exited(); }));
  INFO(Logs(tmp, "d1"));
  REQUIRE(std::filesystem::exists(sock));
  CHECK_FALSE(std::filesystem::exists(state + "/control.sock"));

  // Mode 0600, a socket.
  struct stat st {};
  REQUIRE(::stat(sock.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_uid == ::getuid());

  // `ensemblectl status --json`: running, with a live worker list (pids, RSS).
  json status;
  bool live_ok = WaitUntil(60, [&] {
    status = CtlStatusJson(state, tmp.path());
    if (!status.is_object() || status.value("running", false) != true) return false;
    const json& live = status["live"];
    if (!live.is_object() || !live.contains("workers") || live["workers"].size() != kWorkers) return false;
    for (const auto& w : live["workers"])
      if (w.value("pid", 0) <= 0 || w.value("rss_kb", 0) <= 0) return false;
    return true;
  }, 200);
  INFO("last status: " << status.dump(2));
  REQUIRE(live_ok);
  CHECK(status["live"]["control_socket"] == sock);
  CHECK(status["live"]["pid"] == sup);
  auto kids = ChildrenOf(sup);
  for (const auto& w : status["live"]["workers"])
    CHECK(std::find(kids.begin(), kids.end(), w["pid"].get<pid_t>()) != kids.end());
  // The human-readable form lists them too.
  auto human = Ctl({"status", "-s", state}, tmp.path());
  CHECK(human.code == 0);
  CHECK(human.out.find("state: running") != std::string::npos);
  CHECK(human.out.find("RSS MiB") != std::string::npos);

  // Hostile clients: each gets {"ok": false, ...}; the daemon keeps serving.
  std::string big(200 * 1024, 'x');
  std::string junk("\x01\x02\x00\xff\xfe garbage", 14);
  for (const auto& [what, req, half] :
       std::vector<std::tuple<std::string, std::string, bool>>{{"text", "hello garbage\n", false},
                                                               {"cmd not a string", "{\"cmd\": 42}\n", false},
                                                               {"array", "[1,2,3]\n", false},
                                                               {"unknown cmd", "{\"cmd\": \"frobnicate\"}\n", false},
                                                               {"binary, no newline", junk, true},
                                                               {"200 KiB line", big + "\n", false},
                                                               {"nothing at all", "", true}}) {
    std::string reply = RawUnixRequest(sock, req, 5000, half);
    INFO(what << " -> " << reply);
    CHECK(IsRefusal(reply));
    CHECK_FALSE(d.Exited());
  }
  // A client that connects and says nothing is answered by the daemon's deadline (and goes away).
  std::string silent = RawUnixRequest(sock, "", 3000, false);
  CHECK(IsRefusal(silent));
  json good = Parse(RawUnixRequest(sock, "{\"cmd\": \"status\"}\n"));
  REQUIRE(good.is_object());
  CHECK(good["ok"] == true);
  CHECK(good["status"]["workers"].size() == kWorkers);

  // stop: exit 0, members of the round kept; running again completes the run.
  auto stop = Ctl({"stop", "-s", state}, tmp.path());
  INFO(stop.out << stop.err);
  CHECK(stop.code == 0);
  bool timed_out = false;
  int code = d.WaitAtMost(120, &timed_out);
  INFO("after stop: " << Logs(tmp, "d1"));
  CHECK_FALSE(timed_out);
  CHECK(code == 0);
  auto recs = JournalOf(state);
  CHECK(CountEvents(recs, "run_finished") == 0);
  CHECK_FALSE(std::filesystem::exists(sock));  // removed on the way out
  json after = CtlStatusJson(state, tmp.path());
  CHECK(after.value("running", true) == false);

  auto rerun = RunEnsembled(tmp / "cfg.json", tmp.path(), env, 240);
  INFO(rerun.out << rerun.err);
  CHECK(rerun.code == 0);
  recs = JournalOf(state);
  CHECK(CountEvents(recs, "run_finished") == 1);
  CHECK(CountEvents(recs, "round_committed") == 3);
  for (const auto& [key, n] : DoneCounts(recs)) CHECK(n == 1);  // nothing trained twice
}

TEST_CASE("pause holds new members back until resume", "[service][control]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", CtlConfig(state, 3));
  Daemon d(StartDaemon(tmp, tmp / "cfg.json", "d"));
  REQUIRE(WaitUntil(90, [&] { return MembersDone(state) >= 1 || d.Exited(); }));
  INFO(Logs(tmp, "d"));
  REQUIRE(MembersDone(state) >= 1);

  auto pause = Ctl({"pause", "-s", state}, tmp.path());
  INFO(pause.out << pause.err);
  REQUIRE(pause.code == 0);
  CHECK(pause.out.find("pause") != std::string::npos);

  // The running members finish; then nothing runs.
  json live;
  REQUIRE(WaitUntil(60, [&] {
    json s = CtlStatusJson(state, tmp.path());
    if (!s.is_object() || !s["live"].is_object()) return false;
    live = s["live"];
    return live.value("members_running", -1) == 0;
  }, 100));
  CHECK(live.value("paused", false) == true);
  int held = MembersDone(state);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK(MembersDone(state) == held);
  json s = CtlStatusJson(state, tmp.path());
  REQUIRE(s.is_object());
  INFO("status while paused: " << s.dump(2));
  CHECK(s["live"].value("members_running", -1) == 0);
  for (const auto& w : s["live"]["workers"]) CHECK(w.value("state", "") == "idle");
  CHECK_FALSE(d.Exited());
  auto human = Ctl({"status", "-s", state}, tmp.path());
  CHECK(human.out.find("PAUSED") != std::string::npos);

  auto resume = Ctl({"resume", "-s", state}, tmp.path());
  INFO(resume.out << resume.err);
  REQUIRE(resume.code == 0);
  CHECK(WaitUntil(30, [&] { return MembersDone(state) > held; }));
  CHECK(CtlStatusJson(state, tmp.path())["live"].value("paused", true) == false);

  bool timed_out = false;
  int code = d.WaitAtMost(240, &timed_out);
  INFO("at exit: " << Logs(tmp, "d"));
  CHECK_FALSE(timed_out);
  CHECK(code == 0);
  auto recs = JournalOf(state);
  CHECK(CountEvents(recs, "run_finished") == 1);
  CHECK(CountEvents(recs, "member_done") == 3 * kMembers);
}

TEST_CASE("reload: a new rounds.count applies at the next round boundary, a new run_seed is refused",
          "[service][control]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", CtlConfig(state, 3));
  Daemon d(StartDaemon(tmp, tmp / "cfg.json", "d"));
  REQUIRE(WaitUntil(60, [&] {
    return std::filesystem::exists(state + "/control.sock") || d.Exited();
  }));
  INFO(Logs(tmp, "d"));
  REQUIRE(std::filesystem::exists(state + "/control.sock"));

  // Unsafe: a different run_seed would change every member's results.
  WriteText(tmp / "cfg.json", CtlConfig(state, 3, /*seed=*/18));
  auto seed = Ctl({"reload", "-s", state}, tmp.path());
  INFO("reload (run_seed): " << seed.out << seed.err);
  CHECK(seed.code == exit_code::kPermanentFailure);
  CHECK(seed.err.find("/run_seed") != std::string::npos);

  // A broken file is refused too, naming the problem, and the run carries on.
  WriteText(tmp / "cfg.json", R"({"state_dir": ")" + state + R"(", "rounds": {"cuont": 2}})");
  auto broken = Ctl({"reload", "-s", state}, tmp.path());
  INFO("reload (broken): " << broken.out << broken.err);
  CHECK(broken.code == exit_code::kPermanentFailure);
  CHECK(broken.err.find("/rounds/cuont") != std::string::npos);
  CHECK_FALSE(d.Exited());

  // Safe: fewer rounds.
  WriteText(tmp / "cfg.json", CtlConfig(state, 2));
  REQUIRE(RoundsCommitted(state) < 2);
  auto rounds = Ctl({"reload", "-s", state}, tmp.path());
  INFO("reload (rounds): " << rounds.out << rounds.err);
  CHECK(rounds.code == 0);
  CHECK(rounds.out.find("accepted") != std::string::npos);

  bool timed_out = false;
  int code = d.WaitAtMost(240, &timed_out);
  INFO("at exit: " << Logs(tmp, "d"));
  CHECK_FALSE(timed_out);
  CHECK(code == 0);
  auto recs = JournalOf(state);
  CHECK(CountEvents(recs, "round_committed") == 2);
  REQUIRE(CountEvents(recs, "run_finished") == 1);
  for (const auto& r : recs)
    if (r.value("event", "") == "run_finished") CHECK(r.value("rounds", 0) == 2);
  // The seed refused above did not leak in: round 0's members used run_seed 17.
  CHECK(ReadText(tmp / "d.err").find("config reload applied: 2 rounds") != std::string::npos);
}

// A pack_size change alters members' results: reload refuses it (common/config/config_keys.h),
// where the hand-written list before that table let it through as "accepted".
TEST_CASE("reload refuses a changed pack_size (it changes members' results)", "[service][control]") {
  TempDir tmp;
  std::string state = tmp / "state";
  WriteText(tmp / "cfg.json", CtlConfig(state, 3));
  Daemon d(StartDaemon(tmp, tmp / "cfg.json", "d"));
  REQUIRE(WaitUntil(60, [&] { return std::filesystem::exists(state + "/control.sock") || d.Exited(); }));
  INFO(Logs(tmp, "d"));
  REQUIRE_FALSE(d.Exited());
  std::string text = CtlConfig(state, 3);
  text.replace(text.find("\"pack_size\": 1"), std::string("\"pack_size\": 1").size(), "\"pack_size\": \"auto\"");
  WriteText(tmp / "cfg.json", text);
  auto r = Ctl({"reload", "-s", state}, tmp.path());
  INFO("reload (pack_size): " << r.out << r.err);
  CHECK(r.code == exit_code::kPermanentFailure);
  CHECK(r.err.find("/pack_size") != std::string::npos);
  d.Stop(/*now=*/true);
}

// ControlSocket::Listen() unlinks whatever is at its path before binding ("a stale socket of
// a crashed daemon (the state_dir lock proves we own it)"), but the state_dir lock proves
// nothing about the socket path: two runs with the same run_name under one RUNTIME_DIRECTORY
// (the default run_name is "ensembled"; e.g. two instances of a template unit), or two
// configs naming the same service.control_socket, share it. The second daemon silently takes
// the socket over, and `ensemblectl status/stop -s <first state_dir>` then talks to (and
// stops) the second run.
TEST_CASE("a second daemon with the same control socket path does not take over the first one's socket",
          "[service][control]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp / "rt");
  EnvChanges env;
  env.set["RUNTIME_DIRECTORY"] = tmp / "rt";
  WriteText(tmp / "a.json", CtlConfig(tmp / "state-a", 100, 17, "twin", 10, 300));
  WriteText(tmp / "b.json", CtlConfig(tmp / "state-b", 100, 17, "twin", 10, 300));
  Daemon da(StartDaemon(tmp, tmp / "a.json", "a", env));
  pid_t a = da.pid();
  REQUIRE(WaitUntil(60, [&] {
    json s = CtlStatusJson(tmp / "state-a", tmp.path());
    return (s.is_object() && s["live"].is_object() && s["live"].value("pid", 0) == a) || da.Exited();
  }, 200));
  Daemon db(StartDaemon(tmp, tmp / "b.json", "b", env));
  // The second one either refuses to start or runs; give it time to be up.
  WaitUntil(60, [&] {
    return db.Exited() || std::filesystem::exists(RunLayout(tmp / "state-b").StatusFile());
  }, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  json s = CtlStatusJson(tmp / "state-a", tmp.path());
  INFO("status of run a: " << s.dump(2));
  INFO(Logs(tmp, "a") << Logs(tmp, "b"));
  REQUIRE(s.is_object());
  CHECK(s["live"].value("pid", 0) == a);
  CHECK(s["live"].value("run_name", "") == "twin");
  da.Stop(/*now=*/true);
  db.Stop(/*now=*/true);
}

}  // namespace
}  // namespace ens
