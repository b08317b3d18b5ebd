// The lane path on a device (worker/train/lane_step.h with a LaneLauncher, lane_launcher.h): through
// FakeDeviceRuntime, whose lane launcher is the host one (the CUDA kernel's threads, run on the
// CPU with the device's scratch layout), a member trains with the bits it has in the CPU's
// vector lanes, alone and in packs of 7 and 17 in any position, with dropout, L1/L2, SGD and
// Adam; a window is one launch (not one a step), the copies are per window and epoch.
#include "support/trainer_fixture.h"

#include <algorithm>

#include "fakes/fake_device_runtime.h"
#include "worker/device/lane_launcher.h"

namespace ens {
namespace {

using namespace ens::testing;

// Seed 000's shape with hyperparameters varied by index: dropout, SGD with momentum, no
// penalty, another learning rate.
MemberSpec Varied(int index) {
  MemberSpec m = Seed000(index);
  if (index % 3 == 1) m.layers[0].dropout = 0.25;
  if (index % 4 == 3) m.optimizer = OptimizerKind::kSgd, m.momentum = 0.5;
  if (index % 5 == 2) m.l1 = 0.0, m.l2 = 0.0;
  m.lr = 1e-3 * (1 + index % 3);
  return m;
}

std::vector<TrainOutputs> Train(Fixture& f, const std::vector<int>& indices, const std::string& tag,
                                DeviceRuntime* rt, LaneLauncher* lanes, int epochs = 0) {
  std::vector<TrainInputs> in;
  for (int i : indices) {
    MemberSpec spec = Varied(i);
    if (epochs > 0) spec.epochs = epochs;
    in.push_back(f.Inputs(f.Task(spec, i), tag));
    in.back().runtime = rt;
    in.back().lanes = lanes;
  }
  std::vector<TrainOutputs> out;
  TrainPack(in, &out);
  REQUIRE(out.size() == indices.size());
  return out;
}

std::string Checkpoint(const std::string& tag, int i) { return tag + "-m" + std::to_string(1000 + i).substr(1) + ".pt"; }

TEST_CASE("a member trained by the lane kernel's device threads has the CPU lanes' bits, alone and in any pack",
          "[lane_launch][bits]") {
  Fixture f;
  std::vector<int> seventeen;
  for (int i = 16; i >= 0; --i) seventeen.push_back(i);
  const std::vector<int> seven = {9, 2, 14, 0, 5, 11, 16};
  const auto cpu = Train(f, seventeen, "cpu", nullptr, nullptr);
  FakeDeviceRuntime gpu;
  REQUIRE(gpu.Init().ok());
  const std::unique_ptr<LaneLauncher> host = NewHostLaneLauncher();
  gpu.lane_launcher = host.get();
  const auto d17 = Train(f, seventeen, "d17", &gpu, host.get());
  const auto d7 = Train(f, seven, "d7", &gpu, host.get());
  auto position = [](const std::vector<int>& v, int i) { return std::find(v.begin(), v.end(), i) - v.begin(); };
  for (int i : {0, 2, 5, 9, 16}) {
    CAPTURE(i);
    const auto alone = Train(f, {i}, "d1-" + std::to_string(i), &gpu, host.get());
    const auto at = position(seventeen, i);
    RequireSameBits(f, cpu[at], d17[at], Checkpoint("cpu", i), Checkpoint("d17", i));
    RequireSameBits(f, cpu[at], d7[position(seven, i)], Checkpoint("cpu", i), Checkpoint("d7", i));
    RequireSameBits(f, cpu[at], alone[0], Checkpoint("cpu", i), Checkpoint("d1-" + std::to_string(i), i));
  }
  CHECK(cpu[0].holdout_pred != cpu[1].holdout_pred);
}

TEST_CASE("the lane path on a device launches once a window and copies per window, not per step", "[lane_launch]") {
  Fixture f;
  const std::vector<int> pack = {0, 1, 3};  // few members: the trainer's own per-member reads stay below a step count
  struct Counts {
    int64_t launches, to_device, to_host;
  };
  auto run = [&](int epochs) {
    FakeDeviceRuntime gpu;
    REQUIRE(gpu.Init().ok());
    const std::unique_ptr<LaneLauncher> host = NewHostLaneLauncher();
    gpu.lane_launcher = host.get();
    const auto out = Train(f, pack, "count" + std::to_string(epochs), &gpu, host.get(), epochs);
    for (const TrainOutputs& o : out) REQUIRE(o.metrics["epochs_run"] == epochs);
    for (const TrainOutputs& o : out) REQUIRE(o.metrics["engine"] == "lanes");
    return Counts{host->launches(), gpu.to_device, gpu.to_host};
  };
  const Counts two = run(2), six = run(6);
  // One window an epoch here (a few members' row indices are far below a window's bytes): an
  // epoch's training and its validation are one launch each.
  CHECK(two.launches == 2 * 2);
  CHECK(six.launches == 2 * 6);
  // What four more epochs cost in copies, against their 4 x 20 steps: a copy a step would show.
  const int64_t rows = static_cast<int64_t>(f.Inputs(f.tasks[0], "rows").split.train_size());
  const int64_t steps_per_epoch = (rows + 31) / 32;
  REQUIRE(steps_per_epoch >= 16);
  const double to_device = (six.to_device - two.to_device) / 4.0, to_host = (six.to_host - two.to_host) / 4.0;
  CAPTURE(steps_per_epoch, to_device, to_host);
  // Per epoch: a window's offsets, corrections, masks and running blocks, validation's, the
  // epoch's parameters and sums (to the device); the sums and parameters, the trainer's own
  // per-epoch and per-member reads (to the host). A copy a step would add 20.
  CHECK(to_device <= 18);
  CHECK(to_host <= 16);
}

TEST_CASE("without a launcher the fake GPU's pack trains in the CPU's lanes - the launcher's bits", "[lane_launch]") {
  Fixture f;
  FakeDeviceRuntime gpu;
  REQUIRE(gpu.Init().ok());
  // The fake's tensors are on the CPU, so without a launcher the pack takes the CPU's vector
  // lanes; through the host launcher it runs a CUDA launch's threads: the same engine, the same bits.
  const auto on_cpu_lanes = Train(f, {0, 1}, "none", &gpu, nullptr);
  const std::unique_ptr<LaneLauncher> host = NewHostLaneLauncher();
  const auto launched = Train(f, {0, 1}, "launched", &gpu, host.get());
  CHECK(host->launches() > 0);
  for (const auto* out : {&on_cpu_lanes, &launched})
    for (const TrainOutputs& o : *out) CHECK(o.metrics["engine"] == "lanes");
  RequireSameBits(f, on_cpu_lanes[1], launched[1], Checkpoint("none", 1), Checkpoint("launched", 1));
}

}  // namespace
}  // namespace ens
