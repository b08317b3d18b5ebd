#include "worker/device/device_runtime.h"

#include <ATen/Context.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/torch.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "common/base/env_vars.h"
#include "worker/device/lane_launcher.h"

namespace ens {
at::Tensor DeviceRuntime::ToDeviceAsync(const at::Tensor& host) { return ToDevice(host); }

namespace {

using c10::CachingAllocator::StatType;
constexpr auto kAggregate = static_cast<size_t>(StatType::AGGREGATE);

class CpuRuntime final : public DeviceRuntime {
 public:
  bool accelerated() const override { return false; }
  Status Init() override { return Status::Ok(); }
  c10::Device device() const override { return torch::kCPU; }
  StatusOr<AllocatorStats> Stats() override { return AllocatorStats{}; }
  Status ResetPeakStats() override { return Status::Ok(); }
  Status EmptyCache() override { return Status::Ok(); }
  void Synchronize() override {}
  at::Tensor ToDevice(const at::Tensor& host) override { return host; }
  at::Tensor ToHost(const at::Tensor& t) override { return t; }
};

// cuda:0, the one device CUDA_VISIBLE_DEVICES leaves a GPU worker. The allocator is reached
// through c10's device-allocator registry: the worker links no CUDA library; libtorch_cuda
// registers it when cuda_support.h loads it.
class CudaRuntime final : public DeviceRuntime {
 public:
  bool accelerated() const override { return true; }

  Status Init() override {
    if (init_) return *init_;
    init_ = Status::Ok();
    try {
      if (!torch::cuda::is_available()) {
        init_ = Status::InvalidArgument(
            "libtorch cannot use CUDA (no device visible to it, or a driver too old for this torch build's CUDA)");
        return *init_;
      }
      // Fills the caching allocator's device table, creates the primary context and the
      // default generator: everything the allocator calls below assume.
      at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
      // A first allocation proves the context works before the worker says ready.
      (void)torch::empty({1}, torch::TensorOptions().device(torch::kCUDA, 0));
    } catch (const std::exception& e) {
      init_ = Status::InvalidArgument(std::string("cannot initialise CUDA: ") + e.what());
    }
    return *init_;
  }

  c10::Device device() const override {
    return init_ && init_->ok() ? c10::Device(torch::kCUDA, 0) : c10::Device(torch::kCPU);
  }

  LaneLauncher* lanes() override {
    if (!lanes_loaded_) {
      lanes_loaded_ = true;
      const char* off = EnvVarValue(EnvVar::kLaneCuda);
      if (off != nullptr && std::string(off) == "0") {
        lanes_note_ = "ENSEMBLED_LANE_CUDA=0: lane packs train with PackStep";
      } else if (auto l = LoadCudaLaneLauncher(); l.ok()) {
        lanes_ = std::move(*l);
      } else {
        lanes_note_ = "the CUDA lane kernel is not available (" + l.status().message() + "): lane packs train with PackStep";
      }
    }
    return lanes_.get();
  }
  std::string lanes_note() const override { return lanes_note_; }

  StatusOr<AllocatorStats> Stats() override {
    if (Status s = Ready("allocator statistics"); !s.ok()) return s;
    try {
      auto d = Allocator()->getDeviceStats(0);
      return AllocatorStats{d.reserved_bytes[kAggregate].current, d.reserved_bytes[kAggregate].peak,
                            d.allocated_bytes[kAggregate].peak};
    } catch (const std::exception& e) {
      return Status::Internal(std::string("CUDA allocator statistics: ") + e.what());
    }
  }

  Status ResetPeakStats() override {
    if (Status s = Ready("resetting peak statistics"); !s.ok()) return s;
    try {
      Allocator()->resetPeakStats(0);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Internal(std::string("CUDA allocator: ") + e.what());
    }
  }

  Status EmptyCache() override {
    if (Status s = Ready("emptying the cache"); !s.ok()) return s;
    try {
      Allocator()->emptyCache();
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Internal(std::string("CUDA allocator: ") + e.what());
    }
  }

  void Synchronize() override {
    if (init_ && init_->ok()) torch::cuda::synchronize(0);
  }
  at::Tensor ToDevice(const at::Tensor& host) override { return host.to(device()); }
  at::Tensor ToDeviceAsync(const at::Tensor& host) override {
    return host.pin_memory().to(device(), /*non_blocking=*/true);
  }
  at::Tensor ToHost(const at::Tensor& t) override { return t.to(torch::kCPU); }

 private:
  static c10::DeviceAllocator* Allocator() { return c10::getDeviceAllocator(c10::DeviceType::CUDA); }
  Status Ready(const char* what) const {
    if (init_ && init_->ok()) return Status::Ok();
    return Status::Internal(std::string("CUDA is not initialised (") + what + " before DeviceRuntime::Init)");
  }
  std::optional<Status> init_;
  bool lanes_loaded_ = false;
  std::unique_ptr<LaneLauncher> lanes_;
  std::string lanes_note_;
};

bool ContainsAny(const std::string& text, std::initializer_list<const char*> needles) {
  for (const char* n : needles)
    if (text.find(n) != std::string::npos) return true;
  return false;
}

}  // namespace

std::unique_ptr<DeviceRuntime> NewDeviceRuntime(DeviceChoice choice) {
  const bool gpu = choice == DeviceChoice::kGpu || (choice == DeviceChoice::kGpuIfAvailable && torch::cuda::is_available());
  if (gpu) return std::make_unique<CudaRuntime>();
  return std::make_unique<CpuRuntime>();
}

DeviceFault ClassifyTorchError(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return DeviceFault::kOutOfMemory;
  if (dynamic_cast<const c10::AcceleratorError*>(&e) != nullptr) return DeviceFault::kContextLost;
  // CUDA libraries' failures raised through a plain TORCH_CHECK: after any of these the
  // context's state is unknown, so the worker ends rather than run another task in it.
  const std::string what = e.what();
  if (ContainsAny(what, {"CUDA error", "CUBLAS_STATUS_", "CUDNN_STATUS_", "cuDNN error", "CUDA driver error"}))
    return DeviceFault::kContextLost;
  return DeviceFault::kTask;
}

}  // namespace ens
