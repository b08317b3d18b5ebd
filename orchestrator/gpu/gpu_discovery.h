// GPU discovery and worker placement, without CUDA: the supervisor never loads libtorch or
// the CUDA runtime, so it never holds a GPU context.
//
// Where the GPUs come from (GpuInventory::source), first that works:
//   1. ENSEMBLED_GPU_COUNT=N: N GPUs "0".."N-1" with no UUIDs (a test and container override);
//   2. NVML (orchestrator/gpu/nvml.h): UUIDs, names, PCI bus ids, memory, MIG instances;
//   3. /proc/driver/nvidia/gpus/<pci bus id>/information (present whenever the driver is
//      loaded): model, UUID and bus id of each GPU; in some containers it lists the host's GPUs;
//   4. nothing: no GPU.
// GPUs are numbered in PCI bus order, the order CUDA uses under CUDA_DEVICE_ORDER=PCI_BUS_ID,
// which workers get.
//
// What this process may use: an inherited CUDA_VISIBLE_DEVICES (a Slurm allocation, `docker
// --gpus`, a unit with a subset) narrows the inventory, as CUDA would: a comma-separated list of
// indices, GPU UUIDs ("GPU-...", a unique prefix is enough) or MIG UUIDs ("MIG-..."); an empty
// value means no GPU. Unset: every GPU found.
// Workers are pinned by UUID (a MIG instance by its MIG UUID), so PCI reordering or a reboot
// cannot move a slot to another GPU; by index only where no UUID is known.
// Pure functions apart from reading /proc and the environment. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/config/config.h"
#include "common/config/gpu_selection.h"
#include "common/base/status.h"
#include "orchestrator/gpu/nvml.h"

namespace ens {



struct DiscoveredGpu {
  int index = 0;           // PCI bus order
  std::string uuid;        // "" when the source knows none
  std::string name;        // "" when unknown
  std::string pci_bus_id;  // "" when unknown
  uint64_t memory_total_bytes = 0;
  std::vector<std::string> mig_uuids;
};

struct GpuInventory {
  std::string source;  // "ENSEMBLED_GPU_COUNT", "nvml", "/proc/driver/nvidia/gpus" or "none"
  std::string note;    // why NVML was not the source, when it was not
  std::vector<DiscoveredGpu> gpus;
};

// nvml may be null (not available). proc_root is where driver/nvidia/gpus lives (tests).
GpuInventory DiscoverGpus(const Nvml* nvml, const std::string& proc_root = "/proc");

// One device a worker can be pinned to: a GPU or a MIG instance.
struct UsableGpu {
  std::string id;     // what CUDA_VISIBLE_DEVICES gets: the UUID, else the index
  int gpu_index = 0;  // the physical GPU's index in the inventory
  std::string label;  // for logs: "GPU 2 (GPU-8f6c..., NVIDIA H200)"
};

struct UsableGpus {
  std::vector<UsableGpu> devices;
  std::optional<std::string> inherited;  // the CUDA_VISIBLE_DEVICES this process was started with
};

// The devices this process may use. InvalidArgument when the inherited value names a device
// the inventory does not have (naming the token).
StatusOr<UsableGpus> ResolveUsable(const GpuInventory& inv, const std::optional<std::string>& cuda_visible_devices);

// The GPUs a selection may pick from (GpuSelection's resolver, common/config/gpu_selection.h).
std::vector<GpuCandidate> Candidates(const UsableGpus& usable);
// "the 2 GPUs this process may use (CUDA_VISIBLE_DEVICES=... of this process)": for errors.
std::string UsableWhat(const GpuInventory& inv, const UsableGpus& usable);

// What this process finds and may use: NVML (null when it cannot be opened: the inventory's
// note says why), the inventory, an inherited CUDA_VISIBLE_DEVICES, and the usable devices (an
// error when the inherited value names a device the inventory does not have). The one
// discovery `ensembled run` and `ensembled serve` both make.
struct GpuDiscovery {
  std::unique_ptr<Nvml> nvml;
  GpuInventory inventory;
  std::optional<std::string> inherited;
  StatusOr<UsableGpus> usable = UsableGpus{};
};
GpuDiscovery DiscoverThisProcess();

// Where one worker slot runs: a GPU id/UUID for CUDA_VISIBLE_DEVICES, or "" for CPU.
struct WorkerPlacement {
  int slot = 0;
  std::string gpu;  // "" = CPU worker
  // resources.gpu_memory_gb: the worker's part of its GPU as a fraction of the device's
  // memory (the run's share over its workers on that GPU); 0 = no cap.
  double memory_fraction = 0;
  double memory_limit_mb = 0;  // the same part in MiB (the recycle limit it implies)
};

// A usable device's memory in bytes: its GPU's total from the inventory; 0 when unknown (no
// NVML, an id taken as given) or a MIG instance (whose memory NVML's GPU entry does not give).
uint64_t DeviceMemoryBytes(const GpuInventory& inv, const UsableGpu& d);

// gpus "none", or nothing usable under "auto": cpu_workers CPU slots; otherwise
// workers_per_gpu slots per device (slot order: device-major). A count N takes the first N
// usable devices (in CUDA_VISIBLE_DEVICES's order when inherited, else PCI order); fewer is
// InvalidArgument naming /resources/gpus. A "list" entry (an index, a
// UUID or a unique UUID prefix, a MIG UUID) must be one of the usable devices: else
// InvalidArgument naming /resources/gpus/<i>. Listed indices are physical (nvidia-smi's),
// not positions inside an inherited CUDA_VISIBLE_DEVICES. With r.gpu_memory_gb > 0 each GPU
// worker gets its memory_fraction; InvalidArgument naming /resources/gpu_memory_gb when a
// device's memory is unknown or smaller than the share.
StatusOr<std::vector<WorkerPlacement>> PlanWorkers(const ResourcesSpec& r, const UsableGpus& usable,
                                                   const GpuInventory& inv);

// "GPU 2 (GPU-8f6c…, NVIDIA H200), from nvml" lines for the log.
std::string DescribeInventory(const GpuInventory& inv);

}  // namespace ens
