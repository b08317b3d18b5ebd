// libens_lane_cuda.so: the lane kernel on CUDA (lane_kernel.h), one member a thread, from the
// block code every CPU form compiles (lane_kernel_body.inc in its thread form). What is here
// and nowhere else is the launch: one kernel over every block of a pack's window, thread t
// training lane t % 16 of block t / 16 with its own slice of the scratch, on the default
// stream (libtorch's current one in the worker: the launch is ordered with its copies). Each
// thread runs LaunchThread, which the host runs for the tests (LaneLaunchOnHost). Built
// with -fmad=false, -prec-div=true, -prec-sqrt=true, -ftz=false (CMakeLists.txt): the same IEEE
// float operations as the host's -ffp-contract=off code, so a member's bits are the CPU's.
// Loaded by worker/device/lane_launcher.cpp; links the CUDA runtime statically, not libtorch.
#define ENS_LANE_THREAD
#include "worker/kernels/lane_kernel_body.inc"

#include <cuda_runtime.h>

#include <cstdio>

namespace ens {
namespace {

constexpr int kThreadsPerCudaBlock = 128;  // 8 lane blocks

__global__ void LaneWindowKernel(LaneNet net, LanePackWindow pw) {
  LaunchThread(net, pw, static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x);
}

}  // namespace
}  // namespace ens

extern "C" {

// The layout this plugin was built for: the caller refuses a plugin whose structs differ.
__attribute__((visibility("default"))) int ens_lane_cuda_abi() {
  return static_cast<int>(sizeof(ens::LaneNet) * 1000003 + sizeof(ens::LanePackWindow));
}

// One launch over every block of the window; 0, or -1 with a message in `err`. Returns without
// waiting for the kernel (a fault in it surfaces at the caller's next synchronising copy).
__attribute__((visibility("default"))) int ens_lane_cuda_window(const ens::LaneNet* net, const ens::LanePackWindow* pw,
                                                                char* err, size_t err_len) {
  const int64_t threads = pw->blocks * ens::kLaneWidth;
  if (threads <= 0) return 0;
  const int64_t grid = (threads + ens::kThreadsPerCudaBlock - 1) / ens::kThreadsPerCudaBlock;
  ens::LaneWindowKernel<<<static_cast<unsigned>(grid), ens::kThreadsPerCudaBlock, 0, 0>>>(
      *net, *pw);
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return 0;
  std::snprintf(err, err_len, "lane kernel launch (%lld blocks): %s", static_cast<long long>(pw->blocks),
                cudaGetErrorString(e));
  return -1;
}

}  // extern "C"
