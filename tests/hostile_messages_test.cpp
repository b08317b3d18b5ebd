// Hostile messages: while a run is going, garbage is sent to the supervisor's report queue
// (/ens-<uid>-<run id>-up). Every message it can tell is bad is counted (status.json
// "bad_messages") and none is acted on; the run completes with the undisturbed run's bits.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <mqueue.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "common/journal.h"
#include "common/run_layout.h"
#include "support/env_spawn.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

constexpr int kMembers = 4;

// Members slow enough (~2-4 s each) that the run is still going while the garbage arrives.
std::string Config(const std::string& state_dir) {
  return R"({"run_name": "hostile", "state_dir": ")" + state_dir + R"(", "run_seed": 61,
    "resources": {"gpus": "none", "cpu_workers": 2, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 400, "pool_rows": 100, "holdout_rows": 100}},
    "members": {"defaults": {"epochs": 120, "batch_size": 16, "layers": [{"units": 32}, {"units": 16}]}, "count": 4},
    "pack_size": 1,  // one member per task
    "rounds": {"count": 1}})";
}

// mq_send with O_NONBLOCK, retried while the queue is full (at most ~2 s). errno-ish result.
int SendRaw(mqd_t q, const std::string& bytes) {
  for (int i = 0; i < 200; ++i) {
    if (::mq_send(q, bytes.data(), bytes.size(), 0) == 0) return 0;
    if (errno != EAGAIN) return errno;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return EAGAIN;
}

TEST_CASE("garbage on the report queue is counted and ignored and the run's bits do not change",
          "[resilience][hostile]") {
  TempDir tmp;
  WriteText(tmp / "calm.json", Config(tmp / "calm"));
  WriteText(tmp / "hostile.json", Config(tmp / "hostile"));
  auto calm = RunEnsembled(tmp / "calm.json", tmp.path(), {}, 90);
  INFO(calm.out << calm.err);
  REQUIRE(calm.code == 0);

  std::string state = tmp / "hostile";
  RunLayout layout(state);
  pid_t sup = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "hostile.json"}, tmp / "h.out", tmp / "h.err");
  auto t0 = SteadyClock::now();
  // Wait for a busy worker in status.json: its slot and pid.
  int slot = -1;
  int64_t worker_pid = 0;
  std::optional<int> early_exit;
  while (SecondsSince(t0) < 60 && slot < 0) {
    if ((early_exit = TryWait(sup))) break;
    json s = json::parse(ReadText(layout.StatusFile()), nullptr, false);
    if (s.is_object() && s.contains("workers"))
      for (const auto& w : s["workers"])
        if (w.value("state", "") == "busy" && w.value("pid", 0) > 0) {
          slot = w.value("slot", -1);
          worker_pid = w.value("pid", int64_t{0});
          break;
        }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  INFO("hostile run so far:\n" << ReadText(tmp / "h.out") << ReadText(tmp / "h.err"));
  REQUIRE_FALSE(early_exit.has_value());
  REQUIRE(slot >= 0);
  std::string run_id = RunIdOf(state);
  REQUIRE_FALSE(run_id.empty());
  std::string name = "/" + QueuePrefix(run_id) + "up";
  mqd_t q = ::mq_open(name.c_str(), O_WRONLY | O_NONBLOCK);
  INFO("mq_open " << name << ": " << std::strerror(errno));
  REQUIRE(q != static_cast<mqd_t>(-1));

  std::string s = std::to_string(slot), p = std::to_string(worker_pid), me = std::to_string(::getpid());
  // Messages the supervisor can tell are bad (each must be counted) ...
  std::vector<std::pair<std::string, std::string>> detectable = {
      {"not JSON", "this is not JSON at all"},
      {"empty", ""},
      {"truncated JSON", R"({"v": 1, "type": "done", "slot": )" + s + R"(, "pid": )" + p + R"(, "task_id": "r0-m0)"},
      {"8192-byte blob", "{" + std::string(8191, 'A')},
      {"a JSON array", "[1, 2, 3]"},
      {"wrong version", R"({"v": 99, "type": "ready", "slot": )" + s + R"(, "pid": )" + p + "}"},
      {"done for a task the slot was not given",
       R"({"v": 1, "type": "done", "slot": )" + s + R"(, "pid": )" + p + R"(, "task_id": "r7-m999", "metrics": {}})"},
      {"failed for a task the slot was not given",
       R"({"v": 1, "type": "failed", "slot": )" + s + R"(, "pid": )" + p +
           R"(, "task_id": "r7-m998", "error": "forged", "permanent": true})"},
      {"heartbeat with a negative epoch",
       R"({"v": 1, "type": "heartbeat", "slot": )" + s + R"(, "pid": )" + p + R"(, "task_id": "x", "epoch": -5, "rss_kb": 1})"},
      {"unknown type", R"({"v": 1, "type": "reboot", "slot": )" + s + R"(, "pid": )" + p + "}"},
  };
  // ... and ones that look like stale reports from a previous worker (ignored, not counted).
  std::vector<std::pair<std::string, std::string>> stale = {
      {"ready with a pid that is not the worker's", R"({"v": 1, "type": "ready", "slot": )" + s + R"(, "pid": )" + me + "}"},
      {"done from a pid that is not the worker's, for every member",
       R"({"v": 1, "type": "done", "slot": )" + s + R"(, "pid": )" + me + R"(, "task_id": "r0-m000", "metrics": {}})"},
      {"failed (permanent) from a pid that is not the worker's",
       R"({"v": 1, "type": "failed", "slot": )" + s + R"(, "pid": )" + me +
           R"(, "task_id": "r0-m001", "error": "forged", "permanent": true})"},
  };
  int sent_detectable = 0;
  for (const auto& [what, bytes] : detectable) {
    int e = SendRaw(q, bytes);
    INFO(what << ": " << std::strerror(e));
    CHECK(e == 0);
    sent_detectable += e == 0;
  }
  for (const auto& [what, bytes] : stale) {
    int e = SendRaw(q, bytes);
    INFO(what << ": " << std::strerror(e));
    CHECK(e == 0);
  }
  ::mq_close(q);
  double sent_at = SecondsSince(t0);

  // Watch status.json until the count shows up or the run ends; keep the last value.
  int bad = -1;
  std::optional<int> code;
  while (SecondsSince(t0) < 120) {
    if ((code = TryWait(sup))) break;
    json st = json::parse(ReadText(layout.StatusFile()), nullptr, false);
    if (st.is_object()) bad = st.value("bad_messages", bad);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!code) {
    ::kill(sup, SIGKILL);
    Wait(sup);
  }
  std::string err = ReadText(tmp / "h.err");
  INFO("hostile run:\n" << ReadText(tmp / "h.out") << err);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  json st = json::parse(ReadText(layout.StatusFile()), nullptr, false);  // status.json stays after the run
  if (st.is_object()) bad = std::max(bad, st.value("bad_messages", -1));
  std::printf("[hostile] sent %d detectable + %zu stale-looking messages %.1f s into the run (slot %d, worker pid "
              "%lld); status.json bad_messages %d; run %.1f s (undisturbed %.1f s)\n",
              sent_detectable, stale.size(), sent_at, slot, static_cast<long long>(worker_pid), bad,
              SecondsSince(t0), calm.seconds);
  std::fflush(stdout);
  CHECK(bad >= sent_detectable);
  CHECK(err.find("rejected a report") != std::string::npos);

  // Nothing forged was acted on: every member done once, on its first attempt; same bits.
  auto recs = JournalOf(state);
  CHECK(ReplayJournal(recs).finished);
  CHECK(CountEvents(recs, "member_failed") == 0);
  CHECK(RetriedMembers(recs) == 0);
  CHECK(CountEvents(recs, "member_done") == kMembers);
  auto diffs = CompareRuns(tmp / "calm", state, 1, kMembers, tmp.path());
  INFO(Joined(diffs));
  CHECK(diffs.empty());
}

}  // namespace
}  // namespace ens
