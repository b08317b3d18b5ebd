#include "orchestrator/gpu_discovery.h"

#include <cstdlib>
#include <filesystem>

namespace ens {

std::vector<std::string> DiscoverGpus() {
  std::vector<std::string> out;
  int count = 0;
  if (const char* forced = std::getenv("ENSEMBLED_GPU_COUNT")) {
    count = std::atoi(forced);
  } else {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator("/proc/driver/nvidia/gpus", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      ++count;
  }
  for (int i = 0; i < count; ++i) out.push_back(std::to_string(i));
  return out;
}

std::vector<WorkerPlacement> PlanWorkers(const ResourcesSpec& r, const std::vector<std::string>& found) {
  std::vector<std::string> gpus;
  if (r.gpus_mode == "list") gpus = r.gpu_list;
  else if (r.gpus_mode == "auto") gpus = found;
  std::vector<WorkerPlacement> out;
  if (gpus.empty()) {
    for (int i = 0; i < r.cpu_workers; ++i) out.push_back({i, ""});
    return out;
  }
  for (const auto& g : gpus)
    for (int k = 0; k < r.workers_per_gpu; ++k) out.push_back({static_cast<int>(out.size()), g});
  return out;
}

}  // namespace ens
