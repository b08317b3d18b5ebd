// Operators (kernels, on a GPU) a training step dispatches on the CUDA path, counted on this
// machine's CPU: the same tensor ops run on CPU tensors (TrainPath, trainer.h) and every ATen
// operator is counted (worker/device/dispatch_count.h). For packs of K = 1, 64, 512, 4096 members of
// 9 -> (6 ->)x L -> 1 (L = 1-3 hidden layers, sigmoid then relu, huber, Adam, batch 32, 800
// rows: 25 steps an epoch), the PackStep path and the autograd loop that CUDA ran before it.
// Per step = the training epochs' operators (windows' gathers and sums, the epoch's sums and
// host copies included; validation not) / optimizer steps.
//   build/step_kernels [K ...]        (bench/step_kernels.sh records it in bench/results/)
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/base/seed.h"
#include "worker/device/device_runtime.h"
#include "worker/train/trainer.h"

namespace ens {
namespace {

constexpr int kFeatures = 9, kRows = 1000;

std::vector<float> Table(int rows, uint64_t seed) {
  SeededRng rng(seed);
  std::vector<float> t;
  for (int r = 0; r < rows; ++r) {
    double y = 0;
    for (int f = 0; f < kFeatures; ++f) {
      const float x = static_cast<float>(rng.Normal());
      t.push_back(x);
      y += x * (f % 3 == 0 ? 2.0 : 0.5);
    }
    t.push_back(static_cast<float>(y + 0.1 * rng.Normal()));
  }
  return t;
}

// The CPU with its copies to the "device" made real (one operator each, as CUDA's are).
class CopyingCpuRuntime final : public DeviceRuntime {
 public:
  bool accelerated() const override { return false; }
  Status Init() override { return Status::Ok(); }
  c10::Device device() const override { return c10::Device(c10::kCPU); }
  StatusOr<AllocatorStats> Stats() override { return AllocatorStats{}; }
  Status ResetPeakStats() override { return Status::Ok(); }
  Status EmptyCache() override { return Status::Ok(); }
  void Synchronize() override {}
  at::Tensor ToDevice(const at::Tensor& host) override { return host.clone(); }
  at::Tensor ToHost(const at::Tensor& t) override { return t.clone(); }
};

// Operators per step of a pack of `k` members with `hidden` hidden layers on `path`.
double OpsPerStep(int k, int hidden, TrainPath path, const std::vector<float>& train, const std::vector<float>& rest) {
  CopyingCpuRuntime runtime;
  std::vector<TaskSpec> tasks(static_cast<size_t>(k));
  std::vector<TrainInputs> in;
  for (int i = 0; i < k; ++i) {
    TaskSpec& t = tasks[static_cast<size_t>(i)];
    t.task_id = "r0-m" + std::to_string(i);
    t.member_index = i;
    t.seed = MemberSeed(7, static_cast<uint64_t>(i), 0);
    t.rows = kRows;
    t.data_dir = "/nonexistent";
    t.member.name = "m" + std::to_string(i);
    for (int l = 0; l < hidden; ++l) t.member.layers.push_back({6, l % 2 == 0 ? Activation::kSigmoid : Activation::kRelu, 0.0});
    t.member.loss = LossKind::kHuber;
    t.member.huber_delta = 0.35;
    t.member.epochs = 2;
    t.member.batch_size = 32;
    t.member.validation_split = 0.2;
    TrainInputs x;
    x.task = &t;
    x.rows = train.data();
    x.features = kFeatures;
    auto split = MemberRows::Make(t);
    if (!split.ok()) {
      std::fprintf(stderr, "%s\n", split.status().ToString().c_str());
      std::exit(1);
    }
    x.split = std::move(*split);
    x.holdout = rest.data();
    x.holdout_rows = 10;
    x.pool = rest.data();
    x.pool_rows = 10;
    x.runtime = &runtime;
    x.path = path;
    x.count_ops = true;
    in.push_back(std::move(x));
  }
  std::vector<TrainOutputs> out;
  TrainPack(in, &out);
  if (!out[0].status.ok()) {
    std::fprintf(stderr, "K=%d: %s\n", k, out[0].status.ToString().c_str());
    std::exit(1);
  }
  return out[0].metrics["train_ops_per_step"].get<double>();
}

}  // namespace
}  // namespace ens

int main(int argc, char** argv) {
  std::vector<int> ks = {1, 64, 512, 4096};
  if (argc > 1) {
    ks.clear();
    for (int i = 1; i < argc; ++i) ks.push_back(std::atoi(argv[i]));
  }
  ens::ConfigureTorchForDeterminism();
  const std::vector<float> train = ens::Table(ens::kRows, 1), rest = ens::Table(10, 2);
  std::printf("%-6s %-7s %-16s %-16s %s\n", "K", "hidden", "PackStep", "autograd loop", "ratio");
  std::string json = "{\"unit\": \"ATen operators per optimizer step, CUDA path on CPU tensors\", \"rows\": [";
  for (int k : ks)
    for (int hidden = 1; hidden <= 3; ++hidden) {
      const double step = ens::OpsPerStep(k, hidden, ens::TrainPath::kTensorOps, train, rest);
      const double before = ens::OpsPerStep(k, hidden, ens::TrainPath::kAutogradOps, train, rest);
      std::printf("%-6d %-7d %-16.2f %-16.2f %.1fx\n", k, hidden, step, before, before / step);
      std::fflush(stdout);
      char row[160];
      std::snprintf(row, sizeof(row), "%s{\"K\": %d, \"hidden\": %d, \"pack_step\": %.2f, \"autograd_loop\": %.2f}",
                    json.back() == '[' ? "" : ", ", k, hidden, step, before);
      json += row;
    }
  std::printf("JSON %s]}\n", json.c_str());
  return 0;
}
