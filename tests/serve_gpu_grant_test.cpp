// `ensembled serve` handing out GPUs, through the fake NVML (tests/fakes/fake_nvml.cpp) and the
// worker's CUDA-check hook (ENSEMBLED_TEST_CUDA_SEES=given), since CI has no GPU: runs asking 2
// of 4 GPUs get 2 UUIDs each in their workers' CUDA_VISIBLE_DEVICES, never one another run holds.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/state/run_layout.h"
#include "support/env_spawn_notify.h"
#include "support/serve_harness.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string FakeUuid(int i) {
  char b[64];
  std::snprintf(b, sizeof(b), "GPU-fa4e00%02d-0000-4000-8000-000000000000", i);
  return b;
}

// The GPUs the run's workers were pinned to (status.json keeps the last worker table).
std::set<std::string> PinnedGpus(const std::string& state_dir) {
  json st = json::parse(ReadText(RunLayout(state_dir).StatusFile()), nullptr, false);
  std::set<std::string> out;
  if (st.is_object() && st.contains("workers"))
    for (const auto& w : st["workers"]) out.insert(w.value("gpu", ""));
  return out;
}

// From the queue journal: the most runs that held GPUs at once; FAILs a GPU granted to two
// runs at once.
size_t MostAtOnceNoneShared(const std::string& queue_journal) {
  auto recs = ReadJournal(queue_journal);
  REQUIRE(recs.ok());
  std::map<std::string, std::vector<std::string>> holding;  // run -> its GPUs, while it runs
  size_t most_at_once = 0;
  for (const auto& r : *recs) {
    std::string run = r.value("run", "");
    if (r["event"] == "started") {
      for (const auto& [other, gpus] : holding)
        for (const auto& g : r["gpus"]) {
          INFO(run << " got " << g << " while " << other << " ran");
          CHECK(std::find(gpus.begin(), gpus.end(), g.get<std::string>()) == gpus.end());
        }
      holding[run] = r["gpus"].get<std::vector<std::string>>();
      most_at_once = std::max(most_at_once, holding.size());
    } else if (r["event"] == "ended") {
      holding.erase(run);
    }
  }
  return most_at_once;
}

EnvChanges FourFakeGpus() {
  EnvChanges env;
  env.set = {{"ENSEMBLED_NVML_LIBRARY", ENS_FAKE_NVML}, {"FAKE_NVML_GPUS", "4"}, {"ENSEMBLED_TEST_CUDA_SEES", "given"}};
  env.unset = {"ENSEMBLED_GPU_COUNT", "CUDA_VISIBLE_DEVICES"};
  return env;
}

TEST_CASE("runs asking 2 of 4 fake GPUs get 2 UUIDs each and never share one", "[serve][integration][gpu]") {
  ServeDaemonHarness d(2, "\"auto\"");
  EnvChanges env = FourFakeGpus();
  WriteText(d.runs_dir() + "/low.json", TinyRunConfig("low", 1, 1, "", 4, 20, "[0, 1]"));
  WriteText(d.runs_dir() + "/high.json", TinyRunConfig("high", 1, 1, "", 4, 20, "[\"" + FakeUuid(2) + "\", 3]"));
  WriteText(d.runs_dir() + "/middle.json", TinyRunConfig("middle", 1, 1, "", 2, 2, "[1, 2]"));
  WriteText(d.runs_dir() + "/every.json", TinyRunConfig("every", 1, 1, "", 2, 2, "\"auto\""));
  WriteText(d.runs_dir() + "/nine.json", TinyRunConfig("nine", 1, 1, "", 2, 2, "[9]"));
  d.Start(env);
  json nine = d.Run("nine");
  CHECK(nine["state"] == "rejected");
  CHECK(nine["errors"][0]["pointer"] == "/resources/gpus/0");
  d.WaitUntil(
      [&] {
        for (const char* n : {"low", "high", "middle", "every"})
          if (d.StateOf(n) != "finished") return false;
        return true;
      },
      120, "every GPU run finished");
  CHECK(PinnedGpus(d.StateDir("low")) == std::set<std::string>{FakeUuid(0), FakeUuid(1)});
  CHECK(PinnedGpus(d.StateDir("high")) == std::set<std::string>{FakeUuid(2), FakeUuid(3)});
  CHECK(PinnedGpus(d.StateDir("middle")) == std::set<std::string>{FakeUuid(1), FakeUuid(2)});
  CHECK(PinnedGpus(d.StateDir("every")).size() == 4);
  CHECK_THAT(ReadText(d.StateDir("low") + "/serve.log"),
             Catch::Contains("CUDA_VISIBLE_DEVICES=" + FakeUuid(0) + "," + FakeUuid(1)));
  // From the queue journal: no GPU granted to two runs at once.
  CHECK(MostAtOnceNoneShared(d.QueueJournal()) == 2);  // low and high side by side
  CHECK(d.Stop() == 0);
}

TEST_CASE("runs asking a count of 2 of 4 fake GPUs get 2 UUIDs each, lowest free first, never shared - 5 is rejected",
          "[serve][integration][gpu]") {
  ServeDaemonHarness d(2, "\"auto\"");
  WriteText(d.runs_dir() + "/one.json", TinyRunConfig("one", 1, 1, "", 4, 20, "2"));
  WriteText(d.runs_dir() + "/two.json", TinyRunConfig("two", 1, 1, "", 4, 20, "2"));
  WriteText(d.runs_dir() + "/three.json", TinyRunConfig("three", 1, 1, "", 2, 2, "2"));
  WriteText(d.runs_dir() + "/five.json", TinyRunConfig("five", 1, 1, "", 2, 2, "5"));
  d.Start(FourFakeGpus());
  json five = d.Run("five");
  CHECK(five["state"] == "rejected");
  CHECK(five["errors"][0]["pointer"] == "/resources/gpus");
  CHECK(five["errors"][0]["message"] == "asks 5 GPUs, more than this daemon's 4 GPUs");
  d.WaitUntil([&] { return d.RunChildren().size() == 2 || d.StateOf("three") == "finished"; }, 30, "two runs started");
  json three = d.Run("three");
  if (three["state"] == "queued" && d.RunChildren().size() == 2) {
    CHECK(three["reason"] == "needs 2 GPUs, 0 free");
    // A count's ask, not granted yet: no GPUs named, the count shown.
    CHECK(three["gpus"] == json::array());
    CHECK(three["gpu_count"] == 2);
    CHECK(three["resources"] == "2 GPUs (any free)");
  }
  d.WaitUntil(
      [&] {
        for (const char* n : {"one", "two", "three"})
          if (d.StateOf(n) != "finished") return false;
        return true;
      },
      120, "every counted run finished");
  std::set<std::string> seen;
  for (const auto& r : QueueEvents(d.QueueJournal(), "started")) {
    auto gpus = r["gpus"].get<std::vector<std::string>>();
    INFO(r.dump());
    REQUIRE(gpus.size() == 2);
    std::string name = r["run"].get<std::string>();
    CHECK(PinnedGpus(d.StateDir(name)) == std::set<std::string>(gpus.begin(), gpus.end()));
    CHECK_THAT(ReadText(d.StateDir(name) + "/serve.log"), Catch::Contains("CUDA_VISIBLE_DEVICES=" + gpus[0] + "," + gpus[1]));
    seen.insert(gpus.begin(), gpus.end());
  }
  // The first run took GPUs 0 and 1 (the lowest free), the second 2 and 3.
  auto started = QueueEvents(d.QueueJournal(), "started");
  REQUIRE(started.size() == 3);
  CHECK(started[0]["gpus"] == json{FakeUuid(0), FakeUuid(1)});
  CHECK(started[1]["gpus"] == json{FakeUuid(2), FakeUuid(3)});
  CHECK(seen.size() == 4);
  CHECK(MostAtOnceNoneShared(d.QueueJournal()) == 2);
  CHECK(d.Stop() == 0);
}

// A worker of the daemon's runs pinned to `gpu`, as (cmdline, environment); empty when none runs.
std::pair<std::string, std::vector<std::string>> WorkerOn(const std::string& gpu) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    std::string cmd = CmdlineOf(pid);
    if (cmd.find("ensemble-worker serve") == std::string::npos) continue;
    std::vector<std::string> env = EnvironOf(pid);
    if (std::find(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES=" + gpu) != env.end()) return {cmd, env};
  }
  return {};
}

TEST_CASE("runs asking 60 GB shares of 144 GB fake GPUs: two share GPU 0, the third takes GPU 1, a whole-GPU run "
          "waits for an empty GPU; each worker is capped at its share",
          "[serve][integration][gpu][share]") {
  ServeDaemonHarness d(2, "\"auto\"");
  EnvChanges env = FourFakeGpus();
  env.set["FAKE_NVML_GPUS"] = "2";
  const std::string share = "1, \"gpu_memory_gb\": 60";
  for (const char* n : {"s1", "s2", "s3"}) {
    WriteText(d.runs_dir() + "/" + n + ".json", TinyRunConfig(n, 1, 1, "", 2, 3000, share));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // submission order = file age
  }
  WriteText(d.runs_dir() + "/whole.json", TinyRunConfig("whole", 1, 1, "", 2, 20, "1"));
  d.Start(env);
  // s1's worker: PyTorch's caching allocator held to 60 of 144 GB, recycled past 60 GB.
  std::pair<std::string, std::vector<std::string>> worker;
  d.WaitUntil(
      [&] {
        worker = WorkerOn(FakeUuid(0));
        return !worker.first.empty();
      },
      30, "a worker on GPU 0");
  {
    INFO(worker.first);
    CHECK(std::find(worker.second.begin(), worker.second.end(),
                    "PYTORCH_CUDA_ALLOC_CONF=per_process_memory_fraction:0.416666667") != worker.second.end());
    CHECK_THAT(worker.first, Catch::Contains("--recycle-gpu-reserved-mb 61440.000000"));
  }
  json whole = d.Run("whole");
  if (whole["state"] == "queued" && d.StateOf("s3") == "running") CHECK(whole["reason"] == "needs 1 GPU, 0 free");
  d.WaitUntil(
      [&] {
        for (const char* n : {"s1", "s2", "s3", "whole"})
          if (d.StateOf(n) != "finished") return false;
        return true;
      },
      180, "every run finished");
  auto started = QueueEvents(d.QueueJournal(), "started");
  REQUIRE(started.size() == 4);
  std::map<std::string, json> gpus_of;
  for (const auto& r : started) gpus_of[r["run"].get<std::string>()] = r["gpus"];
  CHECK(gpus_of["s1"] == json{FakeUuid(0)});
  CHECK(gpus_of["s2"] == json{FakeUuid(0)});
  CHECK(gpus_of["s3"] == json{FakeUuid(1)});
  // From the queue journal: shares overlapped on GPU 0; the whole GPU was never shared.
  std::map<std::string, std::string> holding;  // run -> its GPU, while it runs
  size_t most_on_gpu0 = 0;
  auto recs = ReadJournal(d.QueueJournal());
  REQUIRE(recs.ok());
  for (const auto& r : *recs) {
    std::string run = r.value("run", "");
    if (r["event"] == "started") {
      std::string gpu = r["gpus"][0].get<std::string>();
      for (const auto& [other, g] : holding) {
        INFO(run << " started on " << gpu << " while " << other << " held " << g);
        if (run == "whole" || other == "whole") CHECK(g != gpu);
      }
      holding[run] = gpu;
      most_on_gpu0 = std::max<size_t>(most_on_gpu0, std::count_if(holding.begin(), holding.end(), [&](const auto& h) {
                                        return h.second == FakeUuid(0);
                                      }));
    } else if (r["event"] == "ended") {
      holding.erase(run);
    }
  }
  CHECK(most_on_gpu0 == 2);
  CHECK(d.Stop() == 0);
}

}  // namespace
}  // namespace ens
