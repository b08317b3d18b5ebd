// DeviceRuntime: the worker's one seam to the accelerator runtime (CUDA through libtorch).
//
// Tensor operations run wherever their tensors live; everything else the worker asks of the
// GPU goes through here: initialising CUDA for the worker's device, the caching allocator's
// statistics and cache, a device synchronisation, the explicit copies between host and
// device that the training loop makes, and the lane kernel's launcher for the device. libtorch's rules, which this seam keeps:
//  - CUDA is initialised (Init) before the allocator is asked anything. In torch 2.11 the CUDA
//    caching allocator fills its per-device table only when CUDA is initialised;
//    torch::cuda::is_available() only counts devices, and a statistic asked before that throws
//    "Invalid device argument 0: did you call init?".
//  - A host-to-device copy from pageable memory, and every device-to-host read, waits for the
//    stream: the training loop makes them per epoch (or per window of batches), never per step.
// Nothing here throws: a libtorch error becomes a Status.
//
// The runtimes: NewDeviceRuntime() gives the CPU runtime (no device; the statistics are zero)
// or the CUDA one (cuda:0 of the worker's CUDA_VISIBLE_DEVICES). tests/fakes/
// fake_device_runtime.h stands in for a GPU on a machine without one: tensors stay on the CPU,
// it enforces the rules above and counts every copy and synchronisation (ARCHITECTURE.md says
// what it can and cannot catch). One per worker process; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/base/status.h"

namespace at {
class Tensor;
}
namespace c10 {
struct Device;
}

namespace ens {

class LaneLauncher;

// The caching allocator's figures for the worker's device, in bytes (all 0 on the CPU).
struct AllocatorStats {
  int64_t reserved = 0;       // held from the driver now (what nvidia-smi shows, less the context)
  int64_t reserved_peak = 0;  // since the last ResetPeakStats
  int64_t allocated_peak = 0;
};

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // True for a runtime with a GPU behind it (whether or not Init has run yet).
  virtual bool accelerated() const = 0;
  // Initialises the runtime for the device, once (later calls return the first result).
  // InvalidArgument when the device cannot be used (permanent: another process would see the
  // same). The CPU runtime: always OK.
  virtual Status Init() = 0;
  // Where tensors train: the GPU after a successful Init, else the CPU.
  virtual c10::Device device() const = 0;

  // REQUIRES for these three: Init() returned OK (an error Status otherwise, never a throw).
  virtual StatusOr<AllocatorStats> Stats() = 0;
  virtual Status ResetPeakStats() = 0;
  // Returns the allocator's cached, unused blocks to the driver (a device-wide sync).
  virtual Status EmptyCache() = 0;

  // Waits for the device's work (timings; the end of a task).
  virtual void Synchronize() = 0;
  // One copy of `host` (a CPU tensor) to device(); one copy of `t` to the CPU (a sync when it
  // was on the device). On the CPU runtime both return their argument.
  virtual at::Tensor ToDevice(const at::Tensor& host) = 0;
  virtual at::Tensor ToHost(const at::Tensor& t) = 0;
  // The same copy to device() without waiting for it: on CUDA staged through pinned memory and
  // ordered on the current stream (the staging buffer is kept until the copy is done), so the
  // host goes on filling the next one. `host` may be reused at once. Elsewhere ToDevice.
  virtual at::Tensor ToDeviceAsync(const at::Tensor& host);

  // How lane packs train on this device (lane_launcher.h), or nullptr: none here (the CPU
  // runtime, whose lanes need no launcher; a GPU whose lane kernel did not load, or where
  // ENSEMBLED_LANE_CUDA=0 keeps PackStep: lanes_note() says why). REQUIRES: Init() returned OK.
  virtual LaneLauncher* lanes() { return nullptr; }
  virtual std::string lanes_note() const { return ""; }
};

// Which runtime a worker gets: kGpu for a GPU slot whose CUDA support loaded (its Init fails
// when libtorch cannot use the device); kGpuIfAvailable for a worker run by hand or by
// ensemblectl (CUDA when libtorch sees a device, else the CPU); kCpu otherwise.
enum class DeviceChoice { kCpu, kGpu, kGpuIfAvailable };
std::unique_ptr<DeviceRuntime> NewDeviceRuntime(DeviceChoice choice);

// What a libtorch error means for the worker (TrainPack sorts every c10::Error into one):
enum class DeviceFault {
  kTask,         // shapes, values, a bad module: this task's own, deterministic (permanent)
  kOutOfMemory,  // the allocator could not get memory (transient when others share the GPU)
  kContextLost,  // a CUDA error that leaves the context unusable (illegal address, device-side
                 // assert, launch failure, a device busy or gone): the worker must end
};
// Sorts by type (c10::OutOfMemoryError, c10::AcceleratorError) and, for errors raised through a
// plain TORCH_CHECK by CUDA libraries, by the CUDA/cuBLAS/cuDNN error text.
DeviceFault ClassifyTorchError(const std::exception& e);

}  // namespace ens
