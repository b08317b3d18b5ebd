// Tests of common/subprocess: starting, exec failures, descriptors, environment, process
// groups, credentials, RunToEnd's pipes, timeout, cancellation and output bound.
#include "common/base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "support/temp_dir.h"

namespace ens {
namespace {

const bool kSigpipeIgnored = ::signal(SIGPIPE, SIG_IGN) != SIG_ERR;  // RunToEnd's contract
using ens::testing::TempDir;

SubprocessSpec Sh(const std::string& script) {
  SubprocessSpec s;
  s.argv = {"/bin/sh", "-c", script};
  return s;
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

TEST_CASE("a program that cannot be executed is an error naming it, not a child exiting 127") {
  SubprocessSpec s;
  s.argv = {"/nonexistent/program"};
  auto p = Subprocess::Start(s);
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == Status::Code::kNotFound);
  CHECK(p.status().message().find("/nonexistent/program") != std::string::npos);
  s.argv = {"no-such-program-anywhere-xyz"};
  auto q = Subprocess::Start(s);
  REQUIRE_FALSE(q.ok());
  CHECK(q.status().message().find("not found in PATH") != std::string::npos);
  s.argv = {};
  CHECK_FALSE(Subprocess::Start(s).ok());
}

TEST_CASE("a bare name is looked up in PATH and exit statuses and signals are told apart") {
  auto p = Subprocess::Start(Sh("exit 3"));
  REQUIRE(p.ok());
  ExitInfo e = p->Wait();
  CHECK_FALSE(e.signaled);
  CHECK(e.code == 3);
  CHECK(e.Describe() == "exited with 3");
  SubprocessSpec t;
  t.argv = {"true"};
  auto q = Subprocess::Start(t);
  REQUIRE(q.ok());
  CHECK(q->Wait().ok());
  auto r = Subprocess::Start(Sh("kill -9 $$"));
  REQUIRE(r.ok());
  ExitInfo k = r->Wait();
  CHECK(k.signaled);
  CHECK(k.signal == SIGKILL);
  CHECK(k.Describe().find("SIGKILL") != std::string::npos);
}

TEST_CASE("the child gets the environment asked for and only the passed descriptor") {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  ::setenv("ENS_SUBPROCESS_TEST_DROP", "1", 1);
  // Both well above 0-4, so neither is mistaken for what the child is meant to have.
  int leaked = ::fcntl(::open("/dev/null", O_RDONLY), F_DUPFD, 40);  // not close-on-exec: must still not reach the child
  int pass = ::fcntl(::open("/dev/null", O_RDONLY), F_DUPFD_CLOEXEC, 50);
  REQUIRE(leaked >= 0);
  REQUIRE(pass >= 0);
  SubprocessSpec s = Sh("echo \"A=$ENS_A D=${ENS_SUBPROCESS_TEST_DROP:-gone}\"; ls /proc/self/fd | sort -n | tr '\\n' ' '");
  s.set_env = {{"ENS_A", "x y"}};
  s.unset_env = {"ENS_SUBPROCESS_TEST_DROP"};
  s.pass_fd = pass;
  s.pass_fd_as = 3;
  s.stdout_file = out;
  auto p = Subprocess::Start(s);
  REQUIRE(p.ok());
  REQUIRE(p->Wait().ok());
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  // ls's own directory descriptor shows as one more number; only 0 1 2 3 and that one are open.
  CHECK(text.str().find("A=x y D=gone") == 0);
  CHECK(text.str().find("\n0 1 2 3 4 ") != std::string::npos);
  CHECK(text.str().find(" " + std::to_string(leaked) + " ") == std::string::npos);
  ::close(leaked);
  ::close(pass);
}

TEST_CASE("a child in its own group is killed with what it started") {
  TempDir dir;
  const std::string pidfile = dir.path() + "/grandchild";
  SubprocessSpec s = Sh("sleep 60 & echo $! > " + pidfile + "; wait");
  s.own_process_group = true;
  auto p = Subprocess::Start(s);
  REQUIRE(p.ok());
  pid_t grandchild = 0;
  for (int i = 0; i < 200 && grandchild == 0; ++i) {
    std::ifstream in(pidfile);
    in >> grandchild;
    if (grandchild == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(grandchild > 0);
  CHECK(::getpgid(p->pid()) == p->pid());
  CHECK_FALSE(p->Exited());
  p->Signal(SIGKILL);
  CHECK(p->Wait().signal == SIGKILL);
  for (int i = 0; i < 200 && Alive(grandchild); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  CHECK_FALSE(Alive(grandchild));  // a zombie until init reaps it counts as alive: allow the time
}

TEST_CASE("destroying a running Subprocess kills and reaps it") {
  pid_t pid = 0;
  {
    SubprocessSpec s;
    s.argv = {"/bin/sleep", "60"};  // not through sh: a shell may fork sleep, which would outlive it
    auto p = Subprocess::Start(s);
    REQUIRE(p.ok());
    pid = p->pid();
    CHECK(Alive(pid));
  }
  CHECK_FALSE(Alive(pid));  // reaped: no zombie left either
}

TEST_CASE("RunToEnd writes stdin, reads stdout and reports the exit") {
  std::string big(1 << 20, 'x');  // larger than a pipe buffer both ways
  auto r = RunToEnd(Sh("cat; exit 4"), big, 30);
  REQUIRE(r.ok());
  CHECK(r->out == big);
  CHECK(r->exit.code == 4);
  auto early = RunToEnd(Sh("exit 0"), big, 30);  // exits without reading: EPIPE, not a crash
  REQUIRE(early.ok());
  CHECK(early->exit.ok());
}

TEST_CASE("RunToEnd times out, cancels and bounds the output, killing the process group") {
  auto t0 = std::chrono::steady_clock::now();
  auto slow = RunToEnd(Sh("sleep 60"), "", 0.3);
  REQUIRE_FALSE(slow.ok());
  CHECK(slow.status().code() == Status::Code::kTimeout);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  // Output closed early but the program lingers: still the timeout.
  auto lingering = RunToEnd(Sh("exec >&-; sleep 60"), "", 0.3);
  REQUIRE_FALSE(lingering.ok());
  CHECK(lingering.status().code() == Status::Code::kTimeout);
  int asked = 0;
  auto cancelled = RunToEnd(Sh("sleep 60"), "", 30, [&] { return ++asked < 3; });
  REQUIRE_FALSE(cancelled.ok());
  CHECK(cancelled.status().code() == Status::Code::kCancelled);
  auto flood = RunToEnd(Sh("yes"), "", 30, {}, 1 << 20);
  REQUIRE_FALSE(flood.ok());
  CHECK(flood.status().code() == Status::Code::kInvalidArgument);
  auto missing = RunToEnd(SubprocessSpec{{"/nonexistent/x"}}, "", 1);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
}

TEST_CASE("a child runs with the credentials asked, no capability, an empty bounding set and no_new_privs, or Start says why it could not") {
  if (::geteuid() != 0) {  // setuid needs CAP_SETUID: reported skipped (SKIP_RETURN_CODE)
    std::printf("skipped: not root\n");
    std::fflush(stdout);
    std::_Exit(77);
  }
  SubprocessSpec spec = Sh("id -u; id -g; id -G; grep -E '^(Cap(Eff|Prm|Inh|Amb|Bnd)|NoNewPrivs):' /proc/self/status");
  spec.credentials = ProcessCredentials{65534, 65534, {65534, 100}};
  spec.drop_capabilities = true;
  auto r = RunToEnd(spec, "", 30);
  REQUIRE(r.ok());
  CHECK(r->exit.ok());
  // Hardened as well: an empty bounding set (this parent holds CAP_SETPCAP) and no_new_privs.
  CHECK(r->out == "65534\n65534\n65534 100\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\n"
                  "CapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\n"
                  "NoNewPrivs:\t1\n");

  // Without CAP_SETUID (a child of this test that dropped its capabilities) setuid fails.
  pid_t tester = ::fork();
  REQUIRE(tester >= 0);
  if (tester == 0) {
    ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (::setuid(65534) != 0) ::_exit(2);  // from root to a user: every capability goes
    SubprocessSpec as_other = Sh("exit 0");
    as_other.credentials = ProcessCredentials{65533, 65533, {65533}};
    auto started = Subprocess::Start(as_other);
    bool refused = !started.ok() && started.status().message().find("Operation not permitted") != std::string::npos;
    ::_exit(refused ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(tester, &status, 0) == tester);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

}  // namespace
}  // namespace ens
