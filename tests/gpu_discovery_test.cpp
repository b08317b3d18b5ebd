// Tests of orchestrator/gpu_discovery, orchestrator/nvml and orchestrator/gpu_monitor: where
// GPUs are found (ENSEMBLED_GPU_COUNT, NVML through the fake libnvidia-ml, /proc, nothing),
// PCI ordering, an inherited CUDA_VISIBLE_DEVICES (indices, UUIDs, prefixes, MIG UUIDs, empty),
// worker planning in every resources mode, and sampling (memory, utilisation, temperature,
// power, and a worker process's GPU memory matched by pid).
#include "orchestrator/gpu/gpu_discovery.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "orchestrator/gpu/gpu_monitor.h"
#include "orchestrator/service/run_snapshot.h"
#include "orchestrator/gpu/nvml.h"
#include "support/process_harness.h"

namespace ens {
namespace {

using namespace ens::testing;

// Sets (or unsets) an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string FakeUuid(int i) {
  char b[64];
  std::snprintf(b, sizeof(b), "GPU-fa4e00%02d-0000-4000-8000-000000000000", i);
  return b;
}
std::string FakeMig(int gpu, int k) {
  char b[64];
  std::snprintf(b, sizeof(b), "MIG-fa4e00%02d-%04d-4000-8000-000000000000", gpu, k);
  return b;
}

// The fake NVML's state is fixed when the library loads; each process loads it once. So
// cases needing another fake setup run in a child, which reports back through its exit code.
template <typename F>
int InChild(F fn) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(fn());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

GpuInventory FakeInventory(std::unique_ptr<Nvml>* keep = nullptr) {
  ScopedEnv lib("ENSEMBLED_NVML_LIBRARY", ENS_FAKE_NVML);
  ScopedEnv count("ENSEMBLED_GPU_COUNT", nullptr);
  std::string why;
  std::unique_ptr<Nvml> n = Nvml::Open(&why);
  INFO(why);
  REQUIRE(n != nullptr);
  GpuInventory inv = DiscoverGpus(n.get());
  if (keep) *keep = std::move(n);
  return inv;
}

ResourcesSpec Resources(const std::string& mode, int workers_per_gpu = 1, int cpu_workers = 2) {
  ResourcesSpec r;
  r.gpus = mode == "none" ? GpuSelection::None() : mode == "count" ? GpuSelection::Count(1)
           : mode == "list" ? GpuSelection::List({}) : GpuSelection::Auto();
  r.workers_per_gpu = workers_per_gpu;
  r.cpu_workers = cpu_workers;
  return r;
}

std::vector<std::string> Ids(const UsableGpus& u) {
  std::vector<std::string> out;
  for (const auto& d : u.devices) out.push_back(d.id);
  return out;
}

TEST_CASE("gpus none plans cpu_workers CPU slots even when GPUs exist", "[gpu]") {
  GpuInventory inv{"ENSEMBLED_GPU_COUNT", "", {{0, "", "", "", 0, {}}, {1, "", "", "", 0, {}}}};
  auto plan = PlanWorkers(Resources("none", 4, 3), *ResolveUsable(inv, std::nullopt), inv);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 3);
  for (size_t i = 0; i < plan->size(); ++i) {
    CHECK((*plan)[i].slot == static_cast<int>(i));
    CHECK((*plan)[i].gpu.empty());
  }
}

TEST_CASE("gpus auto with nothing found falls back to CPU slots", "[gpu]") {
  GpuInventory none{"none", "", {}};
  auto plan = PlanWorkers(Resources("auto", 4, 2), *ResolveUsable(none, std::nullopt), none);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 2);
  for (const auto& p : *plan) CHECK(p.gpu.empty());
}

TEST_CASE("DiscoverGpus honours ENSEMBLED_GPU_COUNT", "[gpu]") {
  ScopedEnv env("ENSEMBLED_GPU_COUNT", "3");
  GpuInventory inv = DiscoverGpus(nullptr);
  CHECK(inv.source == "ENSEMBLED_GPU_COUNT");
  REQUIRE(inv.gpus.size() == 3);
  auto plan = PlanWorkers(Resources("auto", 4, 1), *ResolveUsable(inv, std::nullopt), inv);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 12);
  CHECK((*plan)[0].gpu == "0");
  CHECK((*plan)[11].gpu == "2");
}

TEST_CASE("gpu_memory_gb: each GPU worker's part of its GPU - unknown memory or a share past it is refused",
          "[gpu][share]") {
  GpuInventory inv{"nvml", "", {{0, "GPU-a", "H200", "0000:10:00.0", uint64_t{16} << 30, {}},
                                {1, "GPU-b", "H200", "0000:20:00.0", uint64_t{16} << 30, {}}}};
  ResourcesSpec r = Resources("count", 2);
  r.gpus.count = 1;
  r.gpu_memory_gb = 4;
  auto plan = PlanWorkers(r, *ResolveUsable(inv, std::nullopt), inv);
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 2);
  for (const WorkerPlacement& w : *plan) {
    CHECK(w.gpu == "GPU-a");
    CHECK(w.memory_fraction == Approx(4.0 / 2 / 16));  // 4 GB over its 2 workers, of 16 GB
    CHECK(w.memory_limit_mb == Approx(2048));
  }
  r.gpu_memory_gb = 0;  // whole GPUs: no cap
  plan = PlanWorkers(r, *ResolveUsable(inv, std::nullopt), inv);
  REQUIRE(plan.ok());
  CHECK((*plan)[0].memory_fraction == 0);

  r.gpu_memory_gb = 17;
  plan = PlanWorkers(r, *ResolveUsable(inv, std::nullopt), inv);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message() == "/resources/gpu_memory_gb: 17 GB is more than GPU 'GPU-a' has (16 GB)");

  GpuInventory counted{"ENSEMBLED_GPU_COUNT", "", {{0, "", "", "", 0, {}}}};
  r.gpu_memory_gb = 1;
  plan = PlanWorkers(r, *ResolveUsable(counted, std::nullopt), counted);
  REQUIRE_FALSE(plan.ok());
  CHECK_THAT(plan.status().message(), Catch::StartsWith("/resources/gpu_memory_gb: the memory of GPU '0' is unknown"));
}

TEST_CASE("8 GPUs through NVML: UUIDs, names, PCI order, 4 workers each pinned by UUID", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "8"), rev("FAKE_NVML_REVERSED", "1");
          GpuInventory inv = FakeInventory();
          if (inv.source != "nvml" || inv.gpus.size() != 8) return 1;
          for (int i = 0; i < 8; ++i)  // listed in reverse, numbered in PCI order
            if (inv.gpus[i].uuid != FakeUuid(i) || inv.gpus[i].index != i || inv.gpus[i].name != "Fake NVIDIA H200")
              return 2;
          if (inv.gpus[0].memory_total_bytes != 144ULL << 30) return 3;
          auto plan = PlanWorkers(Resources("auto", 4, 1), *ResolveUsable(inv, std::nullopt), inv);
          if (!plan.ok() || plan->size() != 32) return 4;
          if ((*plan)[0].gpu != FakeUuid(0) || (*plan)[31].gpu != FakeUuid(7) || (*plan)[4].gpu != FakeUuid(1)) return 5;
          if (DescribeInventory(inv).find("8 GPU(s) from nvml") == std::string::npos) return 6;
          return 0;
        }) == 0);
}

TEST_CASE("an inherited CUDA_VISIBLE_DEVICES narrows what auto uses", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "8");
          GpuInventory inv = FakeInventory();
          auto by_index = ResolveUsable(inv, std::string("2,3"));
          if (!by_index.ok() || Ids(*by_index) != std::vector<std::string>{FakeUuid(2), FakeUuid(3)}) return 1;
          auto by_uuid = ResolveUsable(inv, FakeUuid(5) + "," + FakeUuid(1));
          if (!by_uuid.ok() || Ids(*by_uuid) != std::vector<std::string>{FakeUuid(5), FakeUuid(1)}) return 2;
          // A unique UUID prefix, as CUDA accepts it.
          auto prefix = ResolveUsable(inv, std::string("GPU-fa4e0006"));
          if (!prefix.ok() || Ids(*prefix) != std::vector<std::string>{FakeUuid(6)}) return 3;
          auto empty = ResolveUsable(inv, std::string(""));
          if (!empty.ok() || !empty->devices.empty()) return 4;
          auto plan = PlanWorkers(Resources("auto", 2, 3), *empty, inv);
          if (!plan.ok() || plan->size() != 3 || !(*plan)[0].gpu.empty()) return 5;  // empty: CPU workers
          auto unknown = ResolveUsable(inv, std::string("1,9"));
          if (unknown.ok() || unknown.status().message().find("'9'") == std::string::npos) return 6;
          auto ambiguous = ResolveUsable(inv, std::string("GPU-fa4e"));
          if (ambiguous.ok()) return 7;
          // auto inside the allocation: 2 workers on each of GPUs 2 and 3.
          plan = PlanWorkers(Resources("auto", 2, 1), *by_index, inv);
          if (!plan.ok() || plan->size() != 4 || (*plan)[0].gpu != FakeUuid(2) || (*plan)[3].gpu != FakeUuid(3)) return 8;
          return 0;
        }) == 0);
}

TEST_CASE("a gpus list outside the inherited set is an error at its JSON pointer", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "4");
          GpuInventory inv = FakeInventory();
          auto usable = ResolveUsable(inv, std::string("1,3"));
          if (!usable.ok()) return 1;
          ResourcesSpec r = Resources("list", 1, 1);
          r.gpus.list = {"3", "0"};
          auto plan = PlanWorkers(r, *usable, inv);
          if (plan.ok() || plan.status().message().find("/resources/gpus/1") == std::string::npos ||
              plan.status().message().find("CUDA_VISIBLE_DEVICES=1,3") == std::string::npos)
            return 2;
          r.gpus.list = {"3", FakeUuid(1)};  // an index and a UUID, both inside: pinned by UUID
          plan = PlanWorkers(r, *usable, inv);
          if (!plan.ok() || plan->size() != 2 || (*plan)[0].gpu != FakeUuid(3) || (*plan)[1].gpu != FakeUuid(1)) return 3;
          return 0;
        }) == 0);
}

TEST_CASE("a gpus count takes the first usable GPUs - more than there are is an error at /resources/gpus",
          "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "4");
          GpuInventory inv = FakeInventory();
          ResourcesSpec r = Resources("count", 2, 1);
          r.gpus.count = 2;
          auto plan = PlanWorkers(r, *ResolveUsable(inv, std::nullopt), inv);  // GPUs 0 and 1, 2 workers each
          if (!plan.ok() || plan->size() != 4 || (*plan)[0].gpu != FakeUuid(0) || (*plan)[1].gpu != FakeUuid(0) ||
              (*plan)[3].gpu != FakeUuid(1))
            return 1;
          // Inside an inherited CUDA_VISIBLE_DEVICES (a served run's grant): in its order.
          auto granted = ResolveUsable(inv, FakeUuid(3) + "," + FakeUuid(2));
          r.workers_per_gpu = 1;
          plan = PlanWorkers(r, *granted, inv);
          if (!plan.ok() || plan->size() != 2 || (*plan)[0].gpu != FakeUuid(3) || (*plan)[1].gpu != FakeUuid(2)) return 2;
          r.gpus.count = 3;
          plan = PlanWorkers(r, *granted, inv);
          if (plan.ok() || plan.status().message().rfind("/resources/gpus: asks 3 GPUs, more than the 2 GPUs this process may use (", 0) != 0)
            return 3;
          GpuInventory none{"none", "", {}};  // a count needs GPUs: never CPU workers in their place
          plan = PlanWorkers(r, *ResolveUsable(none, std::nullopt), none);
          if (plan.ok() || plan.status().message().find("the 0 GPUs this process may use") == std::string::npos) return 4;
          return 0;
        }) == 0);
}

TEST_CASE("MIG instances are devices of their own, named by MIG UUID", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "2"), mig("FAKE_NVML_MIG", "1:3");
          GpuInventory inv = FakeInventory();
          if (inv.gpus.size() != 2 || inv.gpus[1].mig_uuids.size() != 3) return 1;
          auto all = ResolveUsable(inv, std::nullopt);
          if (!all.ok() || Ids(*all) != std::vector<std::string>{FakeUuid(0), FakeMig(1, 0), FakeMig(1, 1), FakeMig(1, 2)})
            return 2;
          auto one = ResolveUsable(inv, FakeMig(1, 2));
          if (!one.ok() || Ids(*one) != std::vector<std::string>{FakeMig(1, 2)}) return 3;
          auto plan = PlanWorkers(Resources("auto", 1, 1), *one, inv);
          if (!plan.ok() || plan->size() != 1 || (*plan)[0].gpu != FakeMig(1, 2)) return 4;
          return 0;
        }) == 0);
}

TEST_CASE("without NVML the driver's /proc entries are read, with their UUIDs", "[gpu]") {
  ScopedEnv count("ENSEMBLED_GPU_COUNT", nullptr);
  ScopedEnv lib("ENSEMBLED_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
  std::string why;
  CHECK(Nvml::Open(&why) == nullptr);
  CHECK(why.find("NVML not loaded") != std::string::npos);
  TempDir root;
  auto gpu = [&](const std::string& bus, const std::string& model, const std::string& uuid) {
    std::string dir = root / ("driver/nvidia/gpus/" + bus);
    REQUIRE(std::system(("mkdir -p '" + dir + "'").c_str()) == 0);
    WriteText(dir + "/information", "Model: \t\t " + model + "\nIRQ:   \t\t 42\nGPU UUID: \t " + uuid +
                                        "\nBus Location: \t " + bus + "\n");
  };
  gpu("0000:b1:00.0", "NVIDIA A100", "GPU-bbbb");
  gpu("0000:3b:00.0", "NVIDIA A100", "GPU-aaaa");
  GpuInventory inv = DiscoverGpus(nullptr, root.path());
  CHECK(inv.source == "/proc/driver/nvidia/gpus");
  REQUIRE(inv.gpus.size() == 2);
  CHECK(inv.gpus[0].uuid == "GPU-aaaa");  // PCI order
  CHECK(inv.gpus[1].uuid == "GPU-bbbb");
  CHECK(inv.gpus[0].name == "NVIDIA A100");
  TempDir empty;
  GpuInventory none = DiscoverGpus(nullptr, empty.path());
  CHECK(none.source == "none");
  CHECK(none.gpus.empty());
}

TEST_CASE("a failing nvmlInit means no NVML, with the error", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "2"), fail("FAKE_NVML_INIT_ERROR", "9");
          ScopedEnv lib("ENSEMBLED_NVML_LIBRARY", ENS_FAKE_NVML);
          std::string why;
          if (Nvml::Open(&why) != nullptr) return 1;
          return why.find("nvmlInit failed with NVML error 9") != std::string::npos ? 0 : 2;
        }) == 0);
}

TEST_CASE("GpuMonitor samples every GPU and each worker process's GPU memory", "[gpu][nvml]") {
  CHECK(InChild([] {
          ScopedEnv n("FAKE_NVML_GPUS", "2");
          std::unique_ptr<Nvml> nvml;
          GpuInventory inv = FakeInventory(&nvml);
          // A "worker" pinned to GPU 1: a child of this process with that CUDA_VISIBLE_DEVICES.
          pid_t w = ::fork();
          if (w == 0) {
            ::setenv("CUDA_VISIBLE_DEVICES", FakeUuid(1).c_str(), 1);
            ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
            ::_exit(127);
          }
          ::usleep(300000);  // until it has exec'd with its environment
          GpuMonitor mon(std::move(nvml), inv);
          mon.MaybeSample(GpuMonitor::Clock::now(), true);
          RunSnapshot s;
          s.workers.push_back({0, FakeUuid(1), static_cast<int>(w), "busy", "m000", "training", 0, 0, 0, 1, 0});
          s.workers.push_back({1, FakeUuid(0), 999999, "idle", "", "", 0, 0, 0, 1, 0});
          AddGpuReadings(mon.Read(), &s);
          ::kill(w, SIGKILL);
          ::waitpid(w, nullptr, 0);
          if (s.gpu_source != "nvml" || s.gpus.size() != 2) return 1;
          if (s.gpus[1].memory_used_mb != 1024 + 256 || s.gpus[0].memory_used_mb != 1024) return 2;
          if (s.gpus[0].memory_total_mb != 144 * 1024 || s.gpus[0].utilization_pct != 37) return 3;
          if (s.gpus[0].temperature_c != 45 || s.gpus[0].power_w != 123.456) return 4;
          if (s.workers[0].gpu_memory_mb != 256 || s.workers[1].gpu_memory_mb != -1) return 5;
          if (s.gpu_history_mb.size() != 2 || s.gpu_history_mb[1].size() != 1) return 6;
          // Not due again within the interval; due when forced.
          mon.MaybeSample(GpuMonitor::Clock::now());
          RunSnapshot t;
          AddGpuReadings(mon.Read(), &t);
          if (t.gpu_history_mb[0].size() != 1) return 7;
          return 0;
        }) == 0);
}

}  // namespace
}  // namespace ens
