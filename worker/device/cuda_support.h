// CUDA support for the worker, loaded only where it can be used.
//
// The worker links libtorch's CPU half alone (libtorch_cpu, libc10). libtorch_cuda and the
// CUDA libraries it pulls in (cuBLAS, cuDNN, ...) cost a process about 120 MiB of private
// memory just by being loaded (relocations and kernel registration), so a CPU worker never
// loads them: 64 or 256 CPU workers on one machine stay affordable. A GPU worker loads them
// here, before any libtorch call, so the CUDA backend registers itself (dispatcher kernels,
// CUDA hooks, the caching allocator) exactly as if the worker had linked it.
//
// Which: a slot with a GPU (CUDA_VISIBLE_DEVICES set and not empty) must load it; a CPU slot
// (set and empty, as the supervisor starts CPU workers) never does; a worker run by hand or
// by ensemblectl (unset) loads it when it can and runs on the CPU otherwise, as before.
// Not thread-safe: call once, first thing in main.
#pragma once

#include <string>

#include "common/base/status.h"

namespace ens {

enum class CudaSupport { kNotWanted, kLoaded, kUnavailable };

struct CudaSupportResult {
  CudaSupport state = CudaSupport::kNotWanted;
  std::string detail;  // kUnavailable: the loader's error
};

// The library loaded: libtorch_cuda.so from the worker's library path (its RUNPATH: the
// torch wheel's lib directory). ENSEMBLED_TORCH_CUDA_LIB overrides the name (tests).
CudaSupportResult LoadCudaSupport();

// A GPU slot whose CUDA support did not load: the error to fail with (permanent: restarting
// the worker cannot make the library appear). OK in every other case.
Status RequireCudaSupport(const CudaSupportResult& r);

// A GPU worker's check that CUDA sees the device it was given, before it says ready, so a
// worker never trains on the CPU while everyone believes it has a GPU. CUDA must see a device,
// and when CUDA_VISIBLE_DEVICES is a UUID ("GPU-..." or "MIG-..."), that device's UUID must be
// it. Asked through the CUDA driver API (libcuda.so.1 by dlopen: cuInit, cuDeviceGetCount,
// cuDeviceGet, cuDeviceGetUuid), which needs no libtorch and makes no context. A UUID prefix
// (CUDA takes a unique one) matches a device whose UUID starts with it.
// InvalidArgument (permanent: another process would see the same) naming the GPU and what CUDA
// reported. OK for a CPU worker and for CUDA_VISIBLE_DEVICES unset.
// Test hook: ENSEMBLED_TEST_CUDA_SEES replaces what CUDA reports: "none" (no device), a UUID
// (the device seen), or "given" (exactly the device given: a GPU worker on a CPU machine).
Status CheckAssignedGpu();

// True for a worker given a GPU (CUDA_VISIBLE_DEVICES set and not empty).
bool IsGpuSlot();

}  // namespace ens
