// The worker's GPU path on a machine without a GPU: TaskRunner and the trainer through
// FakeDeviceRuntime (tests/fakes/fake_device_runtime.h), which enforces libtorch's CUDA rules
// and counts every host-device copy. Also the sorting of libtorch errors (device_runtime.h).
#include "support/trainer_fixture.h"

#include "fakes/fake_device_runtime.h"
#include "common/base/atomic_file.h"
#include "common/data/data_source.h"
#include "common/state/dataset_segment.h"
#include "common/state/run_layout.h"
#include "worker/device/device_runtime.h"
#include "worker/process/task_runner.h"

namespace ens {
namespace {

using testing::FakeDeviceRuntime;
using testing::ScratchDir;

constexpr int kRows = 640, kEpochs = 3, kBatch = 16;

// A run's data directory on disk (train, holdout and pool segments) and its member tasks, as
// the supervisor lays them out: what TaskRunner reads.
struct RunFixture {
  ScratchDir dir;
  std::string data_dir = dir.File("data");

  RunFixture() {
    REQUIRE(MakeDirs(data_dir).ok());
    REQUIRE(DatasetWriter::Create(RunLayout::TrainSegment(data_dir), GenerateFriedman1(kRows, 6, 0.1, 1), 0).ok());
    REQUIRE(DatasetWriter::Create(RunLayout::HoldoutSegment(data_dir), GenerateFriedman1(100, 6, 0.1, 2), 0).ok());
    REQUIRE(DatasetWriter::Create(RunLayout::PoolSegment(data_dir), GenerateFriedman1(50, 6, 0.1, 3), 0).ok());
  }

  TaskSpec Task(int index, double dropout = 0.0) {
    TaskSpec t;
    t.member.name = "m" + std::to_string(100 + index).substr(1);
    t.member.layers = {{16, Activation::kRelu, dropout}, {8, Activation::kTanh, dropout}};
    t.member.epochs = kEpochs;
    t.member.batch_size = kBatch;
    t.task_id = "r0-" + t.member.name;
    t.member_index = index;
    t.seed = MemberSeed(7, index, 0);
    t.rows = kRows;
    t.data_dir = data_dir;
    t.out_dir = dir.File("rounds/r0000/members/" + t.member.name);
    return t;
  }
};

TEST_CASE("a GPU worker initialises CUDA before it asks the allocator anything", "[device]") {
  SECTION("the fake holds to libtorch's rule") {
    FakeDeviceRuntime gpu;
    CHECK_FALSE(gpu.Stats().ok());
    CHECK_FALSE(gpu.ResetPeakStats().ok());
    CHECK(gpu.violations.size() == 2);
  }
  SECTION("a task on a fresh worker") {
    RunFixture f;
    FakeDeviceRuntime gpu;
    TaskRunner runner(&gpu);
    TaskSpec task = f.Task(0);
    TaskOutcome o = runner.Run(task, nullptr);
    INFO(o.status.ToString());
    REQUIRE(o.status.ok());
    CHECK(gpu.violations.empty());
    CHECK(gpu.inits >= 1);
    CHECK(gpu.peak_resets == 1);  // the task's peaks are its own
    CHECK(o.metrics.contains("gpu_reserved_peak_mb"));
    CHECK(o.metrics.at("gpu_reserved_peak_mb").get<double>() == 64.0);
  }
}

TEST_CASE("training copies between host and device per epoch, never per step", "[device]") {
  RunFixture f;
  FakeDeviceRuntime gpu;
  TaskRunner runner(&gpu);
  for (double dropout : {0.0, 0.25}) {  // dropout masks are drawn on the device, too
    INFO("dropout " << dropout);
    gpu.to_device = gpu.to_host = 0;
    TaskSpec task = f.Task(dropout > 0 ? 1 : 0, dropout);
    TaskOutcome o = runner.Run(task, nullptr);
    INFO(o.status.ToString());
    REQUIRE(o.status.ok());
    const int64_t steps = o.metrics.at("stop_step").get<int64_t>();
    REQUIRE(steps >= kEpochs * 20);  // 512 training rows in batches of 16: 32 steps an epoch
    // Per epoch: the training and the validation indices go to the device (one window each);
    // the loss and two metric sums come back for each. Plus the table itself, once per task,
    // and after training the parameters (one copy per stacked tensor: 6) and the
    // standardisation (4).
    CHECK(gpu.to_device <= 1 + 2 * kEpochs);
    CHECK(gpu.to_host <= 2 * 3 * kEpochs + 6 + 4);
    CHECK(gpu.violations.empty());
  }
}

TEST_CASE("a pack's results reach the host in one copy per stacked tensor, whatever its size", "[device]") {
  std::map<int, int64_t> copies;  // K -> ToHost calls
  for (int k : {2, 8}) {
    testing::Fixture f;
    FakeDeviceRuntime gpu;
    REQUIRE(gpu.Init().ok());
    std::vector<TrainInputs> in;
    for (int i = 0; i < k; ++i) {
      MemberSpec spec;
      spec.name = "m" + std::to_string(100 + i).substr(1);
      spec.layers = {{6, Activation::kRelu, 0.0}};
      spec.epochs = 2;
      in.push_back(f.Inputs(f.Task(spec, i), "k" + std::to_string(k)));
      in.back().runtime = &gpu;
    }
    std::vector<TrainOutputs> out;
    TrainPack(in, &out);
    for (const auto& o : out) REQUIRE(o.status.ok());
    copies[k] = gpu.to_host;
  }
  // Per epoch the loss and two metric sums of training and of validation (2 x 3 x 2 epochs),
  // then the four stacked parameters and the four standardisation tensors.
  CHECK(copies[2] == 2 * 3 * 2 + 4 + 4);
  CHECK(copies[8] == copies[2]);
}

TEST_CASE("a CUDA error that poisons the context fails the task as lost, not as the member's fault", "[device]") {
  RunFixture f;
  FakeDeviceRuntime gpu;
  gpu.fail_at_to_device = 3;  // the first epoch's validation indices: mid-task
  TaskRunner runner(&gpu);
  TaskSpec task = f.Task(0);
  TaskOutcome o = runner.Run(task, nullptr);
  REQUIRE_FALSE(o.status.ok());
  CHECK(o.device_lost);        // the worker ends (exit_code::kDeviceLost) ...
  CHECK_FALSE(o.permanent);    // ... and the supervisor retries the task as after a crash
  CHECK_THAT(o.status.message(), Catch::Contains("CUDA context lost"));
  CHECK_THAT(o.status.message(), Catch::Contains("illegal memory access"));
  CHECK(gpu.empties == 0);     // nothing more is asked of a lost context
}

TEST_CASE("a lone member out of memory is transient, a shape error permanent", "[device]") {
  RunFixture f;
  FakeDeviceRuntime gpu;
  TaskRunner runner(&gpu);
  TaskSpec task = f.Task(0);
  ::setenv("ENSEMBLED_TEST_OOM_ABOVE", "0", 1);
  TaskOutcome oom = runner.Run(task, nullptr);
  ::unsetenv("ENSEMBLED_TEST_OOM_ABOVE");
  REQUIRE_FALSE(oom.status.ok());
  CHECK_FALSE(oom.permanent);  // retried within the supervisor's attempts
  CHECK_FALSE(oom.device_lost);
  CHECK_THAT(oom.status.message(), Catch::Contains("does not fit in memory alone"));
  CHECK(gpu.empties == 1);     // what the failed attempt held goes back before a retry

  ::setenv("ENSEMBLED_TEST_TORCH_ERROR", task.task_id.c_str(), 1);
  TaskOutcome shape = runner.Run(task, nullptr);
  ::unsetenv("ENSEMBLED_TEST_TORCH_ERROR");
  REQUIRE_FALSE(shape.status.ok());
  CHECK(shape.permanent);
  CHECK_FALSE(shape.device_lost);
  CHECK(runner.Run(task, nullptr).status.ok());  // the worker goes on
  CHECK(gpu.violations.empty());
}

TEST_CASE("the GPU cache goes back to the driver only when a task leaves the reservation at its limit", "[device]") {
  RunFixture f;
  FakeDeviceRuntime gpu;
  TaskRunner runner(&gpu, CachePolicy{256 << 20});
  TaskSpec task = f.Task(0);
  gpu.reserved = 100 << 20;
  REQUIRE(runner.Run(task, nullptr).status.ok());
  CHECK(gpu.empties == 0);  // kept for the next task
  gpu.reserved = 300 << 20;
  REQUIRE(runner.Run(task, nullptr).status.ok());
  CHECK(gpu.empties == 1);
  CHECK(gpu.reserved == 0);

  FakeDeviceRuntime unlimited;  // no limit configured: never
  unlimited.reserved = int64_t{64} << 30;
  TaskRunner keeps(&unlimited);
  REQUIRE(keeps.Run(task, nullptr).status.ok());
  CHECK(unlimited.empties == 0);
}

TEST_CASE("libtorch errors are sorted by what they mean for the worker", "[device]") {
  const c10::SourceLocation here{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  CHECK(ClassifyTorchError(c10::OutOfMemoryError(here, "CUDA out of memory. Tried to allocate 2.00 GiB")) ==
        DeviceFault::kOutOfMemory);
  CHECK(ClassifyTorchError(c10::AcceleratorError(here, 710, "CUDA error: device-side assert triggered")) ==
        DeviceFault::kContextLost);
  CHECK(ClassifyTorchError(c10::Error(here, "CUDA error: an illegal memory access was encountered")) ==
        DeviceFault::kContextLost);
  CHECK(ClassifyTorchError(c10::Error(here, "CUBLAS_STATUS_EXECUTION_FAILED when calling cublasSgemm")) ==
        DeviceFault::kContextLost);
  CHECK(ClassifyTorchError(c10::Error(here, "mat1 and mat2 shapes cannot be multiplied (4x3 and 5x6)")) ==
        DeviceFault::kTask);
}

}  // namespace
}  // namespace ens
