// GpuView: one GPU as the supervisor last read it (NVML), for status.json, /metrics, the
// status page and `ensemblectl status`. -1 (or -1.0) where a reading is unknown. Plain data.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <sys/types.h>

namespace ens {

struct GpuView {
  int index = 0;
  std::string uuid, name;
  double memory_used_mb = -1, memory_total_mb = -1;
  int utilization_pct = -1, temperature_c = -1;
  double power_w = -1;
};

// What the GPU monitor (gpu_monitor.h) read last: the GPUs, their memory history, and the GPU
// memory of each process on them (summed over GPUs), for the run's view to take in
// (AddGpuReadings, service/run_snapshot.h).
struct GpuReadings {
  std::string source;  // where the GPUs were found: "nvml", "/proc/driver/nvidia/gpus", ...
  std::vector<GpuView> gpus;
  std::vector<double> history_s;                // sample times, seconds since the monitor started
  std::vector<std::vector<double>> history_mb;  // [gpu][sample]: memory used, MiB
  std::map<pid_t, double> process_mb;           // pid -> its GPU memory, MiB
};

}  // namespace ens
