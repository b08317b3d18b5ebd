// Tests of orchestrator/gpu_discovery: worker planning for every resources mode, and the
// ENSEMBLED_GPU_COUNT override of DiscoverGpus.
#include "orchestrator/gpu_discovery.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ens {
namespace {

// Sets (or unsets) an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = std::string(old);
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

ResourcesSpec Resources(const std::string& mode, int workers_per_gpu = 1, int cpu_workers = 2) {
  ResourcesSpec r;
  r.gpus_mode = mode;
  r.workers_per_gpu = workers_per_gpu;
  r.cpu_workers = cpu_workers;
  return r;
}

// Requires slots 0..n-1 in order.
void RequireDenseSlots(const std::vector<WorkerPlacement>& plan) {
  for (size_t i = 0; i < plan.size(); ++i) {
    INFO("placement " << i);
    REQUIRE(plan[i].slot == static_cast<int>(i));
  }
}

TEST_CASE("gpus none plans cpu_workers CPU slots even when GPUs exist", "[gpu]") {
  std::vector<WorkerPlacement> plan = PlanWorkers(Resources("none", 4, 3), {"0", "1"});
  REQUIRE(plan.size() == 3);
  RequireDenseSlots(plan);
  for (const auto& p : plan) CHECK(p.gpu.empty());
}

TEST_CASE("gpus auto with nothing found falls back to CPU slots", "[gpu]") {
  std::vector<WorkerPlacement> plan = PlanWorkers(Resources("auto", 4, 2), {});
  REQUIRE(plan.size() == 2);
  RequireDenseSlots(plan);
  for (const auto& p : plan) CHECK(p.gpu.empty());
}

TEST_CASE("gpus auto with two GPUs and 4 workers each plans 8 GPU-major slots", "[gpu]") {
  std::vector<WorkerPlacement> plan = PlanWorkers(Resources("auto", 4, 2), {"0", "1"});
  REQUIRE(plan.size() == 8);
  RequireDenseSlots(plan);
  for (size_t i = 0; i < 8; ++i) {
    INFO("slot " << i);
    CHECK(plan[i].gpu == (i < 4 ? "0" : "1"));
  }
}

TEST_CASE("gpus list uses the listed ids or UUIDs, not what was found", "[gpu]") {
  ResourcesSpec r = Resources("list", 2, 5);
  r.gpu_list = {"GPU-8f6c2e1a-0000-1111-2222-333344445555", "GPU-0b9d7c3e-aaaa-bbbb-cccc-ddddeeeeffff"};
  std::vector<WorkerPlacement> plan = PlanWorkers(r, {"0", "1", "2"});
  REQUIRE(plan.size() == 4);
  RequireDenseSlots(plan);
  CHECK(plan[0].gpu == r.gpu_list[0]);
  CHECK(plan[1].gpu == r.gpu_list[0]);
  CHECK(plan[2].gpu == r.gpu_list[1]);
  CHECK(plan[3].gpu == r.gpu_list[1]);
  // A list of indices works the same way, with nothing discovered at all.
  r.gpu_list = {"3"};
  plan = PlanWorkers(r, {});
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].gpu == "3");
  CHECK(plan[1].gpu == "3");
}

TEST_CASE("DiscoverGpus honours ENSEMBLED_GPU_COUNT", "[gpu]") {
  {
    ScopedEnv env("ENSEMBLED_GPU_COUNT", "3");
    CHECK(DiscoverGpus() == std::vector<std::string>{"0", "1", "2"});
  }
  {
    ScopedEnv env("ENSEMBLED_GPU_COUNT", "0");
    CHECK(DiscoverGpus().empty());
  }
  {
    ScopedEnv env("ENSEMBLED_GPU_COUNT", "-2");
    CHECK(DiscoverGpus().empty());
  }
  {
    ScopedEnv env("ENSEMBLED_GPU_COUNT", "2");
    std::vector<WorkerPlacement> plan = PlanWorkers(Resources("auto", 4, 1), DiscoverGpus());
    CHECK(plan.size() == 8);
  }
}

TEST_CASE("Without the override DiscoverGpus counts /proc/driver/nvidia/gpus", "[gpu]") {
  ScopedEnv env("ENSEMBLED_GPU_COUNT", nullptr);
  size_t expected = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++expected;
  std::vector<std::string> found = DiscoverGpus();
  REQUIRE(found.size() == expected);
  for (size_t i = 0; i < found.size(); ++i) CHECK(found[i] == std::to_string(i));
  if (expected == 0) WARN("no /proc/driver/nvidia/gpus here: only the empty case was checked");
}

}  // namespace
}  // namespace ens
