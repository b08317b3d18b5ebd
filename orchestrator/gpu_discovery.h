// GPU discovery without CUDA: the supervisor never loads libtorch or the CUDA runtime, so
// it cannot hold a GPU context. It counts /proc/driver/nvidia/gpus/* (one folder per GPU,
// present whenever the NVIDIA driver is loaded); ENSEMBLED_GPU_COUNT overrides the count
// (tests, containers that hide /proc/driver).
// Pure functions apart from reading /proc. Thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/config.h"

namespace ens {

// GPU indices as strings, "0".."N-1", in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID).
std::vector<std::string> DiscoverGpus();

// Where one worker slot runs: a GPU id/UUID for CUDA_VISIBLE_DEVICES, or "" for CPU.
struct WorkerPlacement {
  int slot = 0;
  std::string gpu;  // "" = CPU worker
};

// gpus "none" or nothing found under "auto": cpu_workers CPU slots; otherwise
// workers_per_gpu slots per GPU (slot order: gpu-major).
std::vector<WorkerPlacement> PlanWorkers(const ResourcesSpec& r, const std::vector<std::string>& found);

}  // namespace ens
