// The Slurm executor (orchestrator/workers/slurm_executor.h) against a real Slurm: each case starts a
// private two-node cluster on localhost (tests/support/slurm_cluster.sh: munged, slurmctld,
// slurmd -N n1 and -N n2, two fake GPUs each) and stops it at the end. Where the cluster cannot
// start (not root, Slurm or munge not installed) the cluster cases exit 77, which ctest reports
// as skipped. The job-script and sbatch-line cases need no cluster.
#include "orchestrator/workers/slurm_executor.h"

#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using namespace ens::testing;
using json = nlohmann::json;

constexpr int kRounds = 2;
constexpr int kMembers = 4;

// A Slurm client command by its path (the test harness execs without a PATH search).
std::string Tool(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    if (::access((d + "/" + name).c_str(), X_OK) == 0) return d + "/" + name;
  return "/usr/bin/" + name;
}

// A private cluster for one test case; exits the test binary with 77 (skipped) when it cannot
// start here.
class SlurmCluster {
 public:
  SlurmCluster() {
    const std::string script = std::string(ENS_SOURCE_DIR) + "/tests/support/slurm_cluster.sh";
    TimedRun r = RunWithEnv({"/bin/bash", script, "start", dir_.path() + "/cluster"}, dir_.path(), {}, 120);
    if (r.code == 77) {
      std::fprintf(stderr, "SKIPPED: no Slurm test cluster here: %s\n", r.err.c_str());
      std::_Exit(77);
    }
    INFO(r.err);
    REQUIRE(r.code == 0);
    const std::string key = "export SLURM_CONF=";
    size_t at = r.out.find(key);
    REQUIRE(at != std::string::npos);
    std::string conf = r.out.substr(at + key.size());
    conf = conf.substr(0, conf.find('\n'));
    ::setenv("SLURM_CONF", conf.c_str(), 1);
  }
  ~SlurmCluster() {
    const std::string script = std::string(ENS_SOURCE_DIR) + "/tests/support/slurm_cluster.sh";
    RunWithEnv({"/bin/bash", script, "stop", dir_.path() + "/cluster"}, dir_.path(), {}, 60);
  }
  const std::string& scratch() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// Short (even) and long (odd) members, one member per task: while a short one reports, the
// other worker is in the middle of a long one.
std::string Config(const std::string& state, const std::string& resources) {
  return R"({"run_name": "slurm", "state_dir": ")" + state + R"(", "run_seed": 31,
    "resources": )" + resources + R"(,
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 150, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 10, "batch_size": 16, "layers": [{"units": 16}]},
                "count": 4,
                "variants": [{"split": "random"},
                             {"split": "bootstrap", "epochs": 3000, "layers": [{"units": 12}, {"units": 8}]}]},
    "mutation": {"policy": "query_by_committee", "k": 10},
    "heartbeat_timeout_s": 30,
    "pack_size": 1,
    "rounds": {"count": 2}})";
}

const char* kLocal = R"({"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1})";
std::string SlurmResources(const std::string& extra = "") {
  return R"({"gpus": "none", "threads_per_worker": 1, "executor": "slurm",
             "slurm": {"workers": 2, "gpus_per_worker": 0, "listen": "127.0.0.1",
                       "advertise_host": "127.0.0.1", "time_limit": "30")" + extra + "}}";
}

std::string WriteConfig(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name + ".json";
  std::ofstream(path) << text;
  return path;
}

// (job id, state) of every job named ens-<run id> Slurm still lists, finished ones included.
std::vector<std::pair<std::string, std::string>> JobsOf(const std::string& run_id, const std::string& scratch) {
  TimedRun r = RunWithEnv({Tool("squeue"), "--noheader", "--states=all", "--name=ens-" + run_id, "--format=%i %T"},
                          scratch, {}, 30);
  std::vector<std::pair<std::string, std::string>> jobs;
  std::istringstream in(r.out);
  for (std::string id, st; in >> id >> st;) jobs.emplace_back(id, st);
  return jobs;
}

int Active(const std::vector<std::pair<std::string, std::string>>& jobs) {
  int n = 0;
  for (const auto& [id, st] : jobs) n += st == "RUNNING" || st == "PENDING" || st == "CONFIGURING" || st == "COMPLETING";
  return n;
}

int JobScripts(const std::string& state) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(state + "/slurm", ec))
    n += e.path().filename().string().rfind("worker-", 0) == 0;
  return n;
}

// Waits until the journal of `state` has at least `n` member_done records.
bool WaitForDone(const std::string& state, int n, double timeout_s) {
  auto t0 = SteadyClock::now();
  while (SecondsSince(t0) < timeout_s) {
    if (CountEvents(JournalOf(state), "member_done") >= n) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// Ids of the run's RUNNING jobs once there are `n` of them (at most timeout_s): a worker may
// already train while its sibling's job still waits for slurmctld's next scheduling tick.
std::vector<std::string> WaitForRunning(const std::string& run_id, size_t n, const std::string& scratch,
                                        double timeout_s) {
  auto t0 = SteadyClock::now();
  std::vector<std::string> ids;
  do {
    ids.clear();
    for (const auto& [id, st] : JobsOf(run_id, scratch))
      if (st == "RUNNING") ids.push_back(id);
    if (ids.size() >= n) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (SecondsSince(t0) < timeout_s);
  return ids;
}

// A daemon started in the background; SIGKILLed and reaped when the case ends early (a failed
// REQUIRE), so no ensembled outlives its test.
// Set pid to 0 once the test has reaped it itself.
struct Daemon {
  pid_t pid;
  ~Daemon() {
    if (pid > 0 && !TryWait(pid)) {
      ::kill(pid, SIGKILL);
      WaitAtMost(pid, 30);
    }
  }
};

// A local run of the same config: the reference bits.
std::string LocalReference(const std::string& scratch) {
  const std::string state = scratch + "/local";
  TimedRun r = RunEnsembled(WriteConfig(scratch, "local", Config(state, kLocal)), scratch, {}, 300);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return state;
}

TEST_CASE("the job script quotes every value and leaves CUDA_VISIBLE_DEVICES to Slurm") {
  WorkerLaunch l;
  l.slot = 3;
  l.argv = {"/opt/ens/ensemble-worker", "serve", "--run-id", "it's"};
  l.set_env = {{"CUDA_VISIBLE_DEVICES", "GPU-123"}, {"OMP_NUM_THREADS", "2"}, {"X", "a b$HOME`x`"}};
  l.unset_env = {"NOTIFY_SOCKET"};
  const std::string s = SlurmExecutor::JobScript(l);
  CHECK(s.rfind("#!/bin/sh\n", 0) == 0);
  CHECK(s.find("CUDA_VISIBLE_DEVICES") == std::string::npos);
  CHECK(s.find("export OMP_NUM_THREADS='2'\n") != std::string::npos);
  CHECK(s.find("export X='a b$HOME`x`'\n") != std::string::npos);
  CHECK(s.find("unset 'NOTIFY_SOCKET'\n") != std::string::npos);
  CHECK(s.find("exec '/opt/ens/ensemble-worker' 'serve' '--run-id' 'it'\\''s'\n") != std::string::npos);
}

TEST_CASE("the sbatch line asks for GPUs, CPUs, memory and time as configured, extra arguments last") {
  SlurmSpec spec;
  spec.partition = "gpu";
  spec.gpus_per_worker = 2;
  spec.cpus_per_worker = 8;
  spec.mem_per_worker_mb = 4096;
  spec.time_limit = "1-00:00:00";
  spec.sbatch_args = {"--account=proj", "--qos=high"};
  SlurmExecutor ex(spec, 1, "/shared/run");
  auto a = ex.SbatchArgv(1, "/shared/run/slurm/worker-x.sh");
  const std::set<std::string> got(a.begin(), a.end());
  for (const char* want : {"--parsable", "--partition=gpu", "--gres=gpu:2", "--cpus-per-task=8", "--mem=4096",
                           "--time=1-00:00:00", "--chdir=/shared/run", "--output=/shared/run/slurm/slot1-%j.log"})
    CHECK(got.count(want) == 1);
  CHECK(a[0] == "sbatch");
  CHECK(a[a.size() - 3] == "--account=proj");
  CHECK(a.back() == "/shared/run/slurm/worker-x.sh");
  spec.gpus_per_worker = 0;  // a CPU-only cluster: no --gres at all
  spec.cpus_per_worker = 0;
  spec.partition.clear();
  SlurmExecutor cpu(spec, 3, "/shared/run");
  auto c = cpu.SbatchArgv(0, "s.sh");
  for (const auto& arg : c) {
    CHECK(arg.rfind("--gres", 0) != 0);
    CHECK(arg.rfind("--partition", 0) != 0);
  }
  CHECK(std::find(c.begin(), c.end(), "--cpus-per-task=3") != c.end());  // threads_per_worker
}

TEST_CASE("a run on Slurm gives the same bits as the same run on local workers") {
  SlurmCluster cluster;
  const std::string& scratch = cluster.scratch();
  const std::string local = LocalReference(scratch);
  const std::string state = scratch + "/slurm";
  TimedRun r = RunEnsembled(WriteConfig(scratch, "slurm", Config(state, SlurmResources())), scratch, {}, 300);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("submitted Slurm job") != std::string::npos);
  CHECK(Joined(CompareRuns(local, state, kRounds, kMembers, scratch)) == "");
  const std::string run_id = RunIdOf(state);
  CHECK(Active(JobsOf(run_id, scratch)) == 0);  // every pilot job ended with the run
  CHECK(JobScripts(state) == 2);                // two workers, no replacement needed
  CHECK(LeftoversOf(run_id).empty());
}

TEST_CASE("a worker job cancelled mid-round is retried with the same bits and replaced") {
  SlurmCluster cluster;
  const std::string& scratch = cluster.scratch();
  const std::string local = LocalReference(scratch);
  const std::string state = scratch + "/slurm";
  const std::string cfg = WriteConfig(scratch, "slurm", Config(state, SlurmResources()));
  pid_t d = SpawnEnv({BinaryPath("ensembled"), "run", "--config", cfg}, scratch + "/d.out", scratch + "/d.err");
  Daemon guard{d};
  REQUIRE(WaitForDone(state, 1, 120));  // m000 (short) done: the other worker is inside m001 (long)
  const std::string run_id = RunIdOf(state);
  std::vector<std::string> cancelled = WaitForRunning(run_id, 2, scratch, 60);
  REQUIRE(cancelled.size() == 2);
  for (const auto& id : cancelled) RunWithEnv({Tool("scancel"), id}, scratch, {}, 30);
  bool timed_out = false;
  int code = WaitAtMost(d, 300, &timed_out);
  guard.pid = 0;  // reaped
  const std::string err = ReadText(scratch + "/d.err");
  INFO(err);
  REQUIRE_FALSE(timed_out);
  REQUIRE(code == 0);
  CHECK(err.find("Slurm job " + cancelled[0] + " CANCELLED") != std::string::npos);
  CHECK(err.find("Slurm job " + cancelled[0] + " Slurm job") == std::string::npos);  // named once
  CHECK(RetriedMembers(JournalOf(state)) >= 1);          // the member in flight ran again
  CHECK(JobScripts(state) >= 3);                          // and a replacement job was submitted
  CHECK(Joined(CompareRuns(local, state, kRounds, kMembers, scratch)) == "");
  CHECK(Active(JobsOf(run_id, scratch)) == 0);
}

TEST_CASE("after the supervisor is SIGKILLed, a resume cancels the run's leftover jobs and ends with the same bits") {
  SlurmCluster cluster;
  const std::string& scratch = cluster.scratch();
  const std::string local = LocalReference(scratch);
  const std::string state = scratch + "/slurm";
  const std::string cfg = WriteConfig(scratch, "slurm", Config(state, SlurmResources()));
  pid_t d = SpawnEnv({BinaryPath("ensembled"), "run", "--config", cfg}, scratch + "/d.out", scratch + "/d1.err");
  Daemon guard{d};
  REQUIRE(WaitForDone(state, 1, 120));
  ::kill(d, SIGKILL);
  WaitAtMost(d, 30);
  guard.pid = 0;  // reaped
  const std::string run_id = RunIdOf(state);
  // A pilot job of the dead supervisor that never noticed (still queued, or wedged on a node):
  // it carries the run's name and must not survive the resume.
  TimedRun stray = RunWithEnv({Tool("sbatch"), "--parsable", "--job-name=ens-" + run_id, "--output=/dev/null",
                               "--wrap", "sleep 300"}, scratch, {}, 30);
  REQUIRE(stray.code == 0);
  std::string stray_id = stray.out.substr(0, stray.out.find_first_of(";\n"));
  TimedRun r = RunEnsembled(cfg, scratch, {}, 300);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("left by an earlier supervisor") != std::string::npos);
  for (const auto& [id, st] : JobsOf(run_id, scratch))
    if (id == stray_id) CHECK(st == "CANCELLED");
  CHECK(Active(JobsOf(run_id, scratch)) == 0);
  CHECK(Joined(CompareRuns(local, state, kRounds, kMembers, scratch)) == "");
}

TEST_CASE("ensemblectl stop and SIGTERM end the run with every one of its jobs cancelled") {
  SlurmCluster cluster;
  const std::string& scratch = cluster.scratch();
  for (const std::string how : {"stop", "SIGTERM"}) {
    const std::string state = scratch + "/" + how;
    const std::string cfg = WriteConfig(scratch, how, Config(state, SlurmResources()));
    pid_t d = SpawnEnv({BinaryPath("ensembled"), "run", "--config", cfg}, scratch + "/" + how + ".out",
                       scratch + "/" + how + ".err");
    Daemon guard{d};
    REQUIRE(WaitForDone(state, 1, 120));
    const std::string run_id = RunIdOf(state);
    CHECK(WaitForRunning(run_id, 2, scratch, 60).size() == 2);
    if (how == "stop") {
      TimedRun c = RunWithEnv({BinaryPath("ensemblectl"), "stop", "--state-dir", state}, scratch, {}, 30);
      CHECK(c.code == 0);
    } else {
      ::kill(d, SIGTERM);
    }
    bool timed_out = false;
    int code = WaitAtMost(d, 300, &timed_out);
    guard.pid = 0;  // reaped
    INFO(ReadText(scratch + "/" + how + ".err"));
    CHECK_FALSE(timed_out);
    CHECK(code == 0);
    CHECK(Active(JobsOf(run_id, scratch)) == 0);
    CHECK(LeftoversOf(run_id).empty());
  }
}

TEST_CASE("a partition Slurm does not have, or a job sbatch refuses, stops the run with exit 78 and says why") {
  SlurmCluster cluster;
  const std::string& scratch = cluster.scratch();
  TimedRun bad = RunEnsembled(
      WriteConfig(scratch, "partition", Config(scratch + "/p", SlurmResources(R"(, "partition": "nosuch")"))),
      scratch, {}, 120);
  CHECK(bad.code == 78);
  CHECK(bad.err.find("/resources/slurm/partition") != std::string::npos);
  CHECK(bad.err.find("nosuch") != std::string::npos);
  TimedRun refused = RunEnsembled(
      WriteConfig(scratch, "refused", Config(scratch + "/r", SlurmResources(R"(, "sbatch_args": ["--gres=gpu:99"])"))),
      scratch, {}, 120);
  INFO(refused.err);
  CHECK(refused.code == 78);
  CHECK(refused.err.find("sbatch refused the worker job") != std::string::npos);
  CHECK(refused.err.find("Requested node configuration is not available") != std::string::npos);
}

}  // namespace
}  // namespace ens
