// Many workers on a stock machine: 64 and 256 CPU workers run with every member done under the
// default per-user POSIX message queue budget of 800 KiB (set here with setrlimit, so the test
// does not depend on the machine), and a SIGKILLed 16-worker run leaves nothing that stops a
// 64-worker run of another config. Until December each worker cost ~35 KiB of that budget
// (about 22 workers per user in total) and a killed run's queues stayed in the kernel.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/state/journal.h"
#include "common/state/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr rlim_t kStockQueueBudget = 819200;  // Debian 12's default RLIMIT_MSGQUEUE
constexpr int kSkipExitCode = 77;             // SKIP_RETURN_CODE of this file's tests (CMakeLists.txt)

// Lowers this process's queue budget (soft and hard) to the stock default; every ensembled it
// starts, and their workers, inherit it.
void UseStockQueueBudget() {
  struct rlimit r {kStockQueueBudget, kStockQueueBudget};
  REQUIRE(::setrlimit(RLIMIT_MSGQUEUE, &r) == 0);
}

// Small members (a few ms of training each): the test is about the workers, not the training.
std::string Config(const std::string& name, const std::string& state_dir, int workers, int members) {
  return R"({"run_name": ")" + name + R"(", "state_dir": ")" + state_dir + R"(", "run_seed": )" +
         std::to_string(workers) + R"(,
    "resources": {"gpus": "none", "cpu_workers": )" + std::to_string(workers) + R"(, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 200, "pool_rows": 40, "holdout_rows": 40}},
    "members": {"defaults": {"epochs": 2, "batch_size": 32, "layers": [{"units": 8}]}, "count": )" +
         std::to_string(members) + R"(},
    "pack_size": 1,
    "rounds": {"count": 1}})";
}

// Runs a config to the end and checks every member is done, once, on its first attempt.
void RunToTheEnd(const std::string& cfg, const std::string& state, const std::string& scratch, int workers,
                 int members, double timeout_s) {
  auto run = RunEnsembled(cfg, scratch, {}, timeout_s);
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  REQUIRE(run.code == 0);
  CHECK(run.out.find(std::to_string(workers) + " CPU workers") != std::string::npos);
  auto recs = JournalOf(state);
  CHECK(ReplayJournal(recs).finished);
  CHECK(CountEvents(recs, "member_done") == members);
  CHECK(CountEvents(recs, "member_failed") == 0);
  std::printf("[many] %d workers, %d members: %.1f s under RLIMIT_MSGQUEUE %llu\n", workers, members, run.seconds,
              static_cast<unsigned long long>(kStockQueueBudget));
  std::fflush(stdout);
}

TEST_CASE("64 CPU workers run under the default 800 KiB queue budget", "[many][slow]") {
  UseStockQueueBudget();
  TempDir tmp;
  WriteText(tmp / "c.json", Config("w64", tmp / "s", 64, 64));
  RunToTheEnd(tmp / "c.json", tmp / "s", tmp.path(), 64, 64, 300);
}

// MemAvailable in MiB (/proc/meminfo), or -1.
long AvailableMib() {
  std::string info = ReadText("/proc/meminfo");
  size_t at = info.find("MemAvailable:");
  return at == std::string::npos ? -1 : std::stol(info.substr(at + 13)) / 1024;
}

TEST_CASE("256 CPU workers run under the default 800 KiB queue budget", "[many][slow]") {
  // A CPU worker holds ~60 MiB of its own (libtorch's CPU half, worker/device/cuda_support.h); 256
  // of them ~15 GiB. Too little memory here is a skip (SKIP_RETURN_CODE), not a failure.
  const long need_mib = 256 * 64 + 2048;
  if (long avail = AvailableMib(); avail >= 0 && avail < need_mib) {
    std::printf("[many] skipped: %ld MiB available, 256 workers need about %ld MiB\n", avail, need_mib);
    std::fflush(stdout);
    std::_Exit(kSkipExitCode);
  }
  UseStockQueueBudget();
  TempDir tmp;
  WriteText(tmp / "c.json", Config("w256", tmp / "s", 256, 256));
  RunToTheEnd(tmp / "c.json", tmp / "s", tmp.path(), 256, 256, 600);
}

TEST_CASE("a SIGKILLed 16-worker run leaves nothing that stops a 64-worker run of another config",
          "[many][resilience]") {
  UseStockQueueBudget();
  TempDir tmp;
  // Members long enough that the first run is mid-round when it is killed.
  std::string first = Config("killed16", tmp / "k", 16, 32);
  first.replace(first.find(R"("epochs": 2)"), 11, R"("epochs": 1600)");
  WriteText(tmp / "k.json", first);
  RunLayout layout(tmp / "k");
  pid_t sup = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "k.json"}, tmp / "k.out", tmp / "k.err");
  auto t0 = SteadyClock::now();
  int busy = 0;
  std::optional<int> early;
  while (SecondsSince(t0) < 120 && busy < 16) {
    if ((early = TryWait(sup))) break;
    json s = json::parse(ReadText(layout.StatusFile()), nullptr, false);
    busy = 0;
    if (s.is_object() && s.contains("workers"))
      for (const auto& w : s["workers"]) busy += w.value("state", "") == "busy";
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO(ReadText(tmp / "k.out") << ReadText(tmp / "k.err"));
  REQUIRE_FALSE(early.has_value());
  REQUIRE(busy == 16);
  REQUIRE(::kill(sup, SIGKILL) == 0);
  Wait(sup);
  std::string run_id = RunIdOf(tmp / "k");
  REQUIRE_FALSE(run_id.empty());
  // Its workers follow it (PR_SET_PDEATHSIG, and their channels' end of stream).
  std::vector<std::string> left = LeftoversOf(run_id);
  for (auto t1 = SteadyClock::now(); !left.empty() && SecondsSince(t1) < 10; left = LeftoversOf(run_id))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  INFO("left by the killed run: " << Joined(left, ", "));
  CHECK(left.empty());

  WriteText(tmp / "n.json", Config("next64", tmp / "n", 64, 64));
  RunToTheEnd(tmp / "n.json", tmp / "n", tmp.path(), 64, 64, 300);
}

}  // namespace
}  // namespace ens
