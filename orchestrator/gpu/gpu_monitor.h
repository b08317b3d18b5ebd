// GpuMonitor: what the supervisor shows about its GPUs.
//
// It holds the inventory found at start (gpu_discovery.h) and, when NVML is there, samples
// every GPU every kGpuSampleInterval: memory used/total, utilisation, temperature, power, and
// the GPU memory of each process on it, which the run's view matches to the worker slots by pid
// (AddGpuReadings, service/run_snapshot.h). The
// last kGpuHistorySamples memory readings per GPU feed the status page's plot (an hour at 5 s).
// A sample costs a few NVML calls per GPU (microseconds each): well within the supervisor's
// 1 % of a core. Without NVML the views carry the inventory only (readings -1).
// Owned and driven by the supervisor loop; not thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <vector>

#include "orchestrator/gpu/gpu_discovery.h"
#include "orchestrator/gpu/nvml.h"
#include "orchestrator/gpu/gpu_view.h"

namespace ens {

inline constexpr std::chrono::seconds kGpuSampleInterval{5};
inline constexpr size_t kGpuHistorySamples = 720;

class GpuMonitor {
 public:
  using Clock = std::chrono::steady_clock;
  GpuMonitor(std::unique_ptr<Nvml> nvml, GpuInventory inventory);

  // Samples when kGpuSampleInterval has passed since the last sample (or force).
  void MaybeSample(Clock::time_point now, bool force = false);
  // The GPUs, their history and each process's GPU memory (by pid), as last sampled.
  GpuReadings Read() const;
  const GpuInventory& inventory() const { return inventory_; }

 private:
  std::unique_ptr<Nvml> nvml_;
  GpuInventory inventory_;
  Clock::time_point started_ = Clock::now(), last_{};
  std::vector<NvmlSample> latest_;  // in inventory order
  std::deque<double> history_s_;
  std::vector<std::deque<double>> history_mb_;
};

}  // namespace ens
