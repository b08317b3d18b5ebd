// LaneLauncher: how a pack's window of lane blocks runs where the CPU's vector lanes do not —
// one launch of the lane kernel's block code (lane_kernel.h) over every block of the window.
//
// On CUDA it is libens_lane_cuda.so (worker/kernels/lane_kernel_cuda.cu: the block code in its thread
// form, one member a CUDA thread), loaded on first use from the worker's folder or
// ENSEMBLED_LANE_CUDA_LIB, with the layout it was built for checked against ours. Nothing else
// on the lane path is CUDA-only: LaneStep (lane_step.h) lays the pack out, copies through the
// DeviceRuntime and calls Window once a window.
//
// The host launcher runs the same thread form on this CPU, thread after thread (what each CUDA
// thread computes, bit for bit): tests give it, with tests/fakes/fake_device_runtime.h, to a
// pack that then trains as on a GPU, launches counted. No libtorch. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "common/base/status.h"
#include "worker/kernels/lane_kernel.h"

namespace ens {

class LaneLauncher {
 public:
  virtual ~LaneLauncher() = default;
  // One launch of every block of `w` (its pointers on the launcher's device; w.scratch holds
  // blocks * 16 * w.scratch_per_thread floats). On CUDA it returns without waiting for the
  // kernel. Internal: the launch failed (a CUDA error's text, which ClassifyTorchError reads
  // as a lost context once the caller raises it).
  virtual Status Window(const LaneNet& net, const LanePackWindow& w) = 0;
  // Launches so far (one per Window call that launched).
  int64_t launches() const { return launches_; }

 protected:
  int64_t launches_ = 0;
};

// The CUDA launcher, or NotFound naming the library and why (not built, not loadable, built
// for another layout). The library is loaded once per process; each call makes a new launcher.
StatusOr<std::unique_ptr<LaneLauncher>> LoadCudaLaneLauncher();

// The thread form on this CPU (LaneIsa::kThread), every thread of the launch in turn.
std::unique_ptr<LaneLauncher> NewHostLaneLauncher();

}  // namespace ens
