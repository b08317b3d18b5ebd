// GPU placement end to end, through the fake NVML (tests/fakes/fake_nvml.cpp, selected with
// ENSEMBLED_NVML_LIBRARY) and the worker's CUDA-check hook (ENSEMBLED_TEST_CUDA_SEES), since
// CI has no GPU:
//   - a worker whose GPU CUDA does not see fails at start: the run exits 78 naming the slot, the
//     GPU and what CUDA reported, and no worker is started again (no respawn loop);
//   - an inherited CUDA_VISIBLE_DEVICES (indices) is honoured by "auto", and a gpus list
//     outside it is an error at its JSON pointer;
//   - GPU metrics reach status.json, `ensemblectl status --json`, the status page and /metrics.
#include <catch2/catch.hpp>

#include <regex>

#include <nlohmann/json.hpp>

#include "common/state/run_layout.h"
#include "support/env_spawn_notify.h"

namespace ens {
namespace {

using json = nlohmann::json;
using namespace ens::testing;

std::string FakeUuid(int i) {
  char b[64];
  std::snprintf(b, sizeof(b), "GPU-fa4e00%02d-0000-4000-8000-000000000000", i);
  return b;
}

std::string Config(const std::string& state_dir, const std::string& gpus, int epochs, int port = 0) {
  return R"({"run_name": "gpus", "state_dir": ")" + state_dir + R"(", "run_seed": 5,
    "resources": {"gpus": )" + gpus + R"(, "workers_per_gpu": 1, "threads_per_worker": 1},
    "data": {"synthetic": {"initial_rows": 300, "pool_rows": 60, "holdout_rows": 60}},
    "members": {"defaults": {"epochs": )" + std::to_string(epochs) + R"(, "batch_size": 16, "layers": [{"units": 16}]},
                "count": 4},
    "pack_size": 1, "rounds": {"count": 1})" +
         (port > 0 ? R"(, "service": {"http_port": )" + std::to_string(port) + "}" : std::string()) + "}";
}

EnvChanges FakeGpus(int n, const std::string& cuda_sees, std::optional<std::string> visible = std::nullopt) {
  EnvChanges e;
  e.set = {{"ENSEMBLED_NVML_LIBRARY", ENS_FAKE_NVML}, {"FAKE_NVML_GPUS", std::to_string(n)},
           {"ENSEMBLED_TEST_CUDA_SEES", cuda_sees}};
  e.unset = {"ENSEMBLED_GPU_COUNT"};
  if (visible) e.set["CUDA_VISIBLE_DEVICES"] = *visible;
  else e.unset.push_back("CUDA_VISIBLE_DEVICES");
  return e;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_CASE("a GPU worker that CUDA cannot see fails the run at start with exit 78, no respawn loop", "[gpu][placement]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "s", "\"auto\"", 2));
  auto run = RunEnsembled(tmp / "c.json", tmp.path(), FakeGpus(2, "none"), 60);
  INFO(run.out << run.err);
  REQUIRE_FALSE(run.timed_out);
  CHECK(run.code == 78);
  // The first slot heard from is named (either may be first), with its GPU.
  CHECK((run.err.find("slot 0 (GPU " + FakeUuid(0) + ")") != std::string::npos ||
         run.err.find("slot 1 (GPU " + FakeUuid(1) + ")") != std::string::npos));
  CHECK(run.err.find("CUDA sees no device") != std::string::npos);
  CHECK(run.err.find("2 GPU(s) from nvml") != std::string::npos);
  // Each slot's worker started once: one "given GPU" complaint per slot at most, never a loop.
  CHECK(Count(run.err, "given GPU " + FakeUuid(0)) <= 2);  // the worker's line and the run's error
  CHECK(run.seconds < 30);
}

TEST_CASE("a GPU that CUDA sees as another device is refused the same way", "[gpu][placement]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "s", "\"auto\"", 2));
  auto run = RunEnsembled(tmp / "c.json", tmp.path(), FakeGpus(1, FakeUuid(7)), 60);
  INFO(run.out << run.err);
  CHECK(run.code == 78);
  CHECK(run.err.find("CUDA sees a different device, fa4e0007") != std::string::npos);
}

TEST_CASE("auto honours an inherited CUDA_VISIBLE_DEVICES - a gpus list outside it is a config error",
          "[gpu][placement]") {
  TempDir tmp;
  WriteText(tmp / "c.json", Config(tmp / "s", "\"auto\"", 2));
  auto run = RunEnsembled(tmp / "c.json", tmp.path(), FakeGpus(4, "given", std::string("1,3")), 120);
  INFO(run.out << run.err);
  REQUIRE(run.code == 0);
  CHECK(run.out.find("2 GPU workers") != std::string::npos);
  json st = json::parse(ReadText(RunLayout(tmp / "s").StatusFile()), nullptr, false);
  REQUIRE(st.is_object());
  std::set<std::string> pinned;
  for (const auto& w : st["workers"]) pinned.insert(w.value("gpu", ""));
  CHECK(pinned == std::set<std::string>{FakeUuid(1), FakeUuid(3)});

  WriteText(tmp / "l.json", Config(tmp / "l", "[3, 0]", 2));
  auto listed = RunEnsembled(tmp / "l.json", tmp.path(), FakeGpus(4, "given", std::string("1,3")), 60);
  INFO(listed.out << listed.err);
  CHECK(listed.code == 78);
  CHECK(listed.err.find("/resources/gpus/1") != std::string::npos);
  CHECK(listed.err.find("CUDA_VISIBLE_DEVICES=1,3") != std::string::npos);

  // An empty inherited value means no GPU: CPU workers, as CUDA would.
  WriteText(tmp / "e.json", Config(tmp / "e", "\"auto\"", 2));
  auto empty = RunEnsembled(tmp / "e.json", tmp.path(), FakeGpus(4, "none", std::string("")), 120);
  INFO(empty.out << empty.err);
  CHECK(empty.code == 0);
  CHECK(empty.out.find("CPU workers") != std::string::npos);
}

TEST_CASE("GPU metrics reach status.json, ensemblectl status, the status page and /metrics", "[gpu][placement]") {
  TempDir tmp;
  int port = FreeTcpPort();
  REQUIRE(port > 0);
  WriteText(tmp / "c.json", Config(tmp / "s", "\"auto\"", 1600, port));
  RunLayout layout(tmp / "s");
  pid_t sup = SpawnEnv({BinaryPath("ensembled"), "run", "--config", tmp / "c.json"}, tmp / "o", tmp / "e",
                       FakeGpus(2, "given"));
  auto t0 = SteadyClock::now();
  // Until both workers are busy and a sample shows their GPU memory.
  json st;
  bool seen = false;
  while (!seen && SecondsSince(t0) < 90 && !TryWait(sup).has_value()) {
    st = json::parse(ReadText(layout.StatusFile()), nullptr, false);
    if (st.is_object() && st.contains("workers") && st["workers"].size() == 2) {
      seen = true;
      for (const auto& w : st["workers"]) seen = seen && w.value("gpu_memory_mb", -1.0) == 256;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  INFO(ReadText(tmp / "o") << ReadText(tmp / "e"));
  REQUIRE(seen);
  CHECK(st["gpu_source"] == "nvml");
  REQUIRE(st["gpus"].size() == 2);
  CHECK(st["gpus"][0]["uuid"] == FakeUuid(0));
  CHECK(st["gpus"][0]["name"] == "Fake NVIDIA H200");
  CHECK(st["gpus"][0]["memory_used_mb"].get<double>() == 1024 + 256);
  CHECK(st["gpus"][0]["utilization_pct"] == 37);
  CHECK(st["gpus"][1]["temperature_c"] == 45);

  auto ctl = RunWithEnv({BinaryPath("ensemblectl"), "status", "--state-dir", tmp / "s", "--json"}, tmp.path());
  json cj = json::parse(ctl.out, nullptr, false);
  INFO(ctl.out << ctl.err);
  REQUIRE(cj.is_object());
  CHECK(cj.dump().find(FakeUuid(1)) != std::string::npos);
  auto text = RunWithEnv({BinaryPath("ensemblectl"), "status", "--state-dir", tmp / "s"}, tmp.path());
  CHECK(text.out.find("Fake NVIDIA H200") != std::string::npos);

  HttpReply page = HttpGet("127.0.0.1", port, "/");
  CHECK(page.body.find("id=\"gpus\"") != std::string::npos);
  CHECK(page.body.find("id=\"gpu-memory\"") != std::string::npos);
  CHECK(page.body.find(FakeUuid(1)) != std::string::npos);
  HttpReply metrics = HttpGet("127.0.0.1", port, "/metrics");
  const std::string labels = "gpu=\"1\",uuid=\"" + FakeUuid(1) + "\"";
  CHECK(metrics.body.find("ensembled_gpu_memory_used_bytes{run=\"gpus\"," + labels + "} 1342177280") !=
        std::string::npos);
  CHECK(metrics.body.find("ensembled_gpu_utilization_ratio{run=\"gpus\"," + labels + "} 0.37") != std::string::npos);
  CHECK(metrics.body.find("ensembled_gpu_power_watts{run=\"gpus\"," + labels + "} 123.456") != std::string::npos);
  CHECK(std::regex_search(metrics.body, std::regex("ensembled_gpu_worker_memory_bytes\\{run=\"gpus\",slot=\"[01]\"," +
                                                   labels + "\\} 268435456")));
  ::kill(sup, SIGTERM);
  ::kill(sup, SIGTERM);
  WaitAtMost(sup, 30);
}

}  // namespace
}  // namespace ens
