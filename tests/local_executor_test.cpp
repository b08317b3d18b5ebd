// LocalExecutor: a worker is a child in a session of its own, and when it is gone nothing it
// started survives it, even in a process group of its own (a command member's program).
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "orchestrator/workers/executor.h"
#include "support/temp_dir.h"

namespace ens {
namespace {

using ens::testing::TempDir;

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// A stand-in worker: starts `sleep` in a process group of its own (as a command member's
// program is), writes its pid, and waits for ever.
WorkerLaunch GroupLeavingWorker(const std::string& pidfile) {
  WorkerLaunch l;
  l.argv = {"/usr/bin/python3", "-c",
            "import os, subprocess, sys, time\n"
            "p = subprocess.Popen(['/bin/sleep', '1000'], preexec_fn=os.setpgrp)\n"
            "open(sys.argv[1] + '.tmp', 'w').write(str(p.pid))\n"
            "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
            "time.sleep(1000)\n",
            pidfile};
  l.token = NewSpawnToken();
  return l;
}

pid_t WaitForPid(const std::string& pidfile) {
  for (int i = 0; i < 500; ++i) {
    pid_t pid = 0;
    std::ifstream(pidfile) >> pid;
    if (pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// A started stand-in worker and its grandchild's pid.
struct Started {
  WorkerHandle handle;
  pid_t grandchild = 0;
};
Started StartGroupLeaving(LocalExecutor& ex, const std::string& pidfile) {
  auto h = ex.Start(GroupLeavingWorker(pidfile));
  REQUIRE(h.ok());
  Started s{*h, WaitForPid(pidfile)};
  REQUIRE(s.grandchild > 0);
  return s;
}

bool GoneWithin(pid_t pid, int ms) {
  for (int i = 0; i < ms / 10 && Alive(pid); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return !Alive(pid);  // a zombie until init reaps it counts as alive: allow the time
}

TEST_CASE("a killed worker's session goes with it, groups of its own included") {
  TempDir dir;
  LocalExecutor ex;
  const auto [h, grandchild] = StartGroupLeaving(ex, dir.path() + "/pid");
  CHECK(::getsid(h.pid) == h.pid);
  CHECK(::getsid(grandchild) == h.pid);
  CHECK(::getpgid(grandchild) != h.pid);  // out of the worker's group: a group kill misses it
  ex.Signal(h, SIGKILL);
  std::vector<WorkerExit> exits;
  for (int i = 0; i < 500 && exits.empty(); ++i) {
    exits = ex.PollExits();
    if (exits.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].exit.signal == SIGKILL);
  CHECK(GoneWithin(grandchild, 3000));
}

TEST_CASE("releasing the executor kills its workers' sessions") {
  TempDir dir;
  LocalExecutor ex;
  const auto [h, grandchild] = StartGroupLeaving(ex, dir.path() + "/pid");
  ex.Release();
  CHECK_FALSE(Alive(h.pid));
  CHECK(GoneWithin(grandchild, 3000));
}

}  // namespace
}  // namespace ens
