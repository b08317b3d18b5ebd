// FakeDeviceRuntime: a GPU that is not there (worker/device/device_runtime.h), so the worker's GPU
// path runs on a CPU machine. Tensors stay on the CPU; what the fake adds is libtorch's CUDA
// rules and a count of everything that would cost a host-device transfer or a sync:
//  - the allocator (Stats, ResetPeakStats, EmptyCache) asked before Init is what throws
//    "Invalid device argument 0: did you call init?" in torch 2.11: here it fails and is
//    recorded in violations;
//  - every ToDevice / ToHost is counted (a ToHost also counts as a sync), so a test can hold the
//    training loop to "per epoch, never per step";
//  - lane_launcher: the lane kernel's launcher it offers (none unless a test sets one);
//  - fail_at_to_device = n throws, at the n-th ToDevice, the c10::AcceleratorError a CUDA
//    kernel fault (illegal address) raises, so the worker's handling of a lost context is tested.
// It cannot see a copy or a sync made outside the seam (a direct .to(device) or .item() on a
// device tensor): ARCHITECTURE.md says so. Header-only; include only from libtorch tests.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "worker/device/device_runtime.h"
#include "worker/device/lane_launcher.h"

namespace ens::testing {

class FakeDeviceRuntime final : public DeviceRuntime {
 public:
  bool accelerated() const override { return true; }
  Status Init() override {
    ++inits;
    initialised = true;
    return Status::Ok();
  }
  c10::Device device() const override { return torch::kCPU; }

  StatusOr<AllocatorStats> Stats() override {
    if (!initialised) return Violation("allocator statistics");
    return AllocatorStats{reserved, reserved, reserved / 2};
  }
  Status ResetPeakStats() override {
    if (!initialised) return Violation("resetPeakStats");
    ++peak_resets;
    return Status::Ok();
  }
  Status EmptyCache() override {
    if (!initialised) return Violation("emptyCache");
    ++empties;
    reserved = 0;
    return Status::Ok();
  }
  void Synchronize() override { ++syncs; }
  at::Tensor ToDevice(const at::Tensor& host) override {
    ++to_device;
    if (fail_at_to_device > 0 && to_device == fail_at_to_device)
      throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, 700,
                                  "CUDA error: an illegal memory access was encountered");
    return host.clone();
  }
  at::Tensor ToHost(const at::Tensor& t) override {
    ++to_host;
    ++syncs;
    return t.clone();
  }

  // The lane launcher this "GPU" offers (worker/device/lane_launcher.h): none unless a test sets one
  // (NewHostLaneLauncher: the CUDA kernel's threads run on the CPU).
  LaneLauncher* lanes() override { return lane_launcher; }

  bool initialised = false;
  LaneLauncher* lane_launcher = nullptr;
  int inits = 0, peak_resets = 0, empties = 0;
  int64_t to_device = 0, to_host = 0, syncs = 0;
  int64_t reserved = 64 << 20;  // what Stats reports (bytes); EmptyCache sets it to 0
  int64_t fail_at_to_device = 0;
  std::vector<std::string> violations;

 private:
  Status Violation(const std::string& what) {
    violations.push_back(what + " before CUDA was initialised");
    return Status::Internal("Invalid device argument 0: did you call init? (" + what + ")");
  }
};

}  // namespace ens::testing
